// The app behind the worker on Node's own `http` module (tests/worker/test_app_servers.py):
// `node node_app.js PORT`, recording each POST to $CONVEYOR_TEST_RECORD and answering by the
// message attribute `mode`, exactly as tests/worker/apps/python_apps.py describes.
"use strict";
const fs = require("fs");
const http = require("http");

const SLOW_MS = 3500;
const BIG = Buffer.alloc(1 << 20, "x");
const port = Number(process.argv[2]);
const recordFile = process.env.CONVEYOR_TEST_RECORD;

function answer(res, status, body, headers = {}) {
  res.writeHead(status, { "Content-Length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

function respond(req, res, mode, first) {
  if (first && mode === "fail500") return answer(res, 500, "boom");
  if (first && mode === "fail503") return answer(res, 503, "busy", { "Retry-After": "1" });
  if (first && mode === "reset") {
    res.writeHead(200, { "Content-Length": 1000 });
    // a crash mid-answer: 10 of 1000 bytes, then a TCP reset
    return res.write("x".repeat(10), () => req.socket.resetAndDestroy());
  }
  if (mode === "chunked") {  // no length: Node chunks by default
    res.writeHead(200);
    res.write("one,");
    res.write("two,");
    return res.end("three");
  }
  if (mode === "close") {  // no length and no chunking: the close ends the body
    res.useChunkedEncodingByDefault = false;
    res.shouldKeepAlive = false;
    res.writeHead(200);
    return res.end("done");
  }
  return answer(res, 200, mode === "big" ? BIG : "ok");
}

const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const mode = req.headers["x-aws-sqsd-attr-mode"] || "length";
    const count = req.headers["x-aws-sqsd-receive-count"] || "";
    fs.appendFileSync(recordFile, `${req.headers["x-aws-sqsd-msgid"]} ${mode} ${count}\n`);
    const first = count === "1";
    if (first && mode === "slow") {
      setTimeout(() => respond(req, res, mode, false), SLOW_MS);
    } else {
      respond(req, res, mode, first);
    }
  });
});
server.listen(port, "127.0.0.1");
