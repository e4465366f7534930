// The control plane as its own process for crash suites: the real server
// (control-plane/src/server.ts's startControlPlane), plus one fault point a test can
// hold. With SVC_TEST_HOLD_AFTER_COMMIT=<n> the first n instance creates of the process
// stop right after their transaction committed, each prints {"test_committed":"inst_…"} and waits for SIGUSR2
// before it goes on (sends the start order, answers): the window in which a cut
// connection or a crash loses the answer to work that is done. Every closed client
// socket prints {"test_socket_closed":<client port>}, so a test knows the server saw its cut.
import { loadControlPlaneConfig } from '../../control-plane/src/config.js';
import { startControlPlane } from '../../control-plane/src/server.js';
import { SqliteInstanceStore } from '../../control-plane/src/store/sqlite/instance-store.js';

let holds = Number(process.env.SVC_TEST_HOLD_AFTER_COMMIT ?? 0);
if (holds > 0) {
  const create = SqliteInstanceStore.prototype.create;
  SqliteInstanceStore.prototype.create = async function (this: SqliteInstanceStore, ...args: Parameters<typeof create>): Promise<void> {
    await create.apply(this, args);
    if (holds === 0) return;
    holds--;
    const resumed = new Promise((resolve) => process.once('SIGUSR2', resolve));
    process.stdout.write(`${JSON.stringify({ test_committed: args[0].id })}\n`);
    await resumed;
  };
}

const { app } = await startControlPlane(loadControlPlaneConfig());
app.server.on('connection', (socket) => {
  const port = socket.remotePort;
  socket.once('close', () => process.stdout.write(`${JSON.stringify({ test_socket_closed: port })}\n`));
});
