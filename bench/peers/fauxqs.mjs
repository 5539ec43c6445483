// Starts fauxqs on 127.0.0.1:<port> with request logging off: in memory, or with its
// SQLite persistence when a data directory is given (node fauxqs.mjs PORT [DATA_DIR]).
// fauxqs's own CLI logs every request and listens on 0.0.0.0; the benchmark wants neither,
// so this wires the stores the way fauxqs's startFauxqs() does.
import { buildApp } from "fauxqs";
import { PersistenceManager } from "../node_modules/fauxqs/dist/persistence.js";
import { S3Store } from "../node_modules/fauxqs/dist/s3/s3Store.js";
import { SnsStore } from "../node_modules/fauxqs/dist/sns/snsStore.js";
import { SqsStore } from "../node_modules/fauxqs/dist/sqs/sqsStore.js";

const port = Number.parseInt(process.argv[2] ?? "", 10);
const dataDir = process.argv[3];
if (!Number.isInteger(port)) {
  console.error("usage: node fauxqs.mjs PORT [DATA_DIR]");
  process.exit(2);
}
const stores = { sqsStore: new SqsStore(), snsStore: new SnsStore(), s3Store: new S3Store() };
let persistence;
if (dataDir) {
  persistence = new PersistenceManager(dataDir);
  persistence.load(stores.sqsStore, stores.snsStore, stores.s3Store);
  for (const store of Object.values(stores)) {
    store.persistence = persistence;
  }
}
const app = buildApp({ logger: false, stores });
await app.listen({ port, host: "127.0.0.1" });
console.log(`fauxqs listening on 127.0.0.1:${port}${dataDir ? ` (SQLite in ${dataDir})` : ""}`);
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => app.close().then(() => {
    persistence?.close();
    process.exit(0);
  }));
}
