// Starts local-aws-sqs (in memory) on 127.0.0.1:<port>, with a /health route for the harness.
import { createServer } from "node:http";
import { createRequestHandler } from "local-aws-sqs";

const port = Number.parseInt(process.argv[2] ?? "", 10);
if (!Number.isInteger(port)) {
  console.error("usage: node local-aws-sqs.mjs PORT");
  process.exit(2);
}
const { requestHandler } = createRequestHandler({ port, hostname: "127.0.0.1" });
const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/health") {
    res.end("ok");
    return;
  }
  requestHandler(req, res);
});
server.listen(port, "127.0.0.1", () => console.log(`local-aws-sqs listening on 127.0.0.1:${port}`));
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
