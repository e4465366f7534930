// The node agent's entry point: `node --import tsx node-agent/src/main.ts`.
// Exit codes: 0 after SIGTERM/SIGINT, 2 for a configuration error, 3 when the control
// plane refuses this node (enrollment token or node identity), 1 for anything else.
import { ConfigError, createLogger, systemClock } from '@svc/shared';
import { startAgent, type RunningAgent } from './agent.js';
import { loadAgentConfig, type AgentConfig } from './config/agent-config.js';
import { GpuHealthFileError } from './health/health-file.js';
import { IdentityFileError } from './identity/identity-store.js';
import { SessionRefusedError } from './session/session-errors.js';

export const EXIT_CONFIG = 2;
export const EXIT_REFUSED = 3;

async function main(): Promise<void> {
  let config: AgentConfig;
  try {
    config = loadAgentConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`node agent: ${err.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw err;
  }
  const log = createLogger(config.logLevel, 'node-agent', undefined, config.logFormat);
  log.info({ control_plane: config.controlPlane, pool: config.pool, data_dir: config.dataDir, tls: config.useTls }, 'node agent starting');
  let agent: RunningAgent;
  try {
    agent = await startAgent(config, { log, clock: systemClock });
  } catch (err) {
    // A TLS file that cannot be read is a configuration error; a corrupt health file
    // needs the operator too. Neither gets better by retrying.
    if (err instanceof ConfigError || err instanceof GpuHealthFileError) {
      process.stderr.write(`node agent: ${err.message}\n`);
      process.exit(err instanceof ConfigError ? EXIT_CONFIG : 1);
    }
    throw err;
  }

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    agent.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  try {
    await agent.done;
  } catch (err) {
    if (err instanceof SessionRefusedError || err instanceof IdentityFileError) {
      const refused = err instanceof SessionRefusedError;
      log.error({ err: err.message }, refused ? 'stopping: the control plane refused this node' : 'stopping: the node identity file is broken');
      process.stderr.write(`node agent: ${err.message}\n`);
      await agent.stop();
      process.exit(refused ? EXIT_REFUSED : 1);
    }
    throw err;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`node agent failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
