// Operator commands for agents travel through the store: svcctl (another process) writes
// a pending row; this dispatcher, in the server, polls about once a second, sends each
// pending command on its node's live session and records the agent's CommandResult.
// A command that finds no session, or gets no answer, fails after COMMAND_TIMEOUT_MS.
import type { Clock } from '@svc/shared';
import type { Command, CommandResult__Output } from '@svc/proto';
import type { NodeRegistry, RegistryLogger } from '../nodes/node-registry.js';
import type { NodeCommandRecord, NodeStore } from '../store/node-store.js';
import type { AgentSession } from './session.js';

export const COMMAND_POLL_MS = 1000;
export const COMMAND_TIMEOUT_MS = 60_000;

/** The wire form of a stored command (pure). */
export function toWireCommand(command: NodeCommandRecord): Command {
  switch (command.kind) {
    case 'reset_gpu_health':
      return { command_id: command.id, reset_gpu_health: { gpu_uuid: command.args.gpuUuid } };
  }
}

export class CommandDispatcher {
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;

  constructor(
    private readonly store: NodeStore,
    private readonly registry: NodeRegistry,
    private readonly clock: Clock,
    private readonly sessionFor: (nodeId: string) => AgentSession | undefined,
    private readonly log: RegistryLogger,
    private readonly pollMs = COMMAND_POLL_MS,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.poll().catch((err: unknown) => this.log.error({ err }, 'node command poll failed'));
    }, this.pollMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.polling;
  }

  /** Sends what is pending and fails what timed out. One poll at a time. */
  poll(): Promise<void> {
    this.polling ??= this.pollNow().finally(() => {
      this.polling = null;
    });
    return this.polling;
  }

  private async pollNow(): Promise<void> {
    const now = this.clock.now();
    for (const command of await this.store.listCommands({ state: 'pending', limit: 1000 })) {
      const session = this.sessionFor(command.nodeId);
      if (session?.sendCommand(toWireCommand(command))) {
        await this.store.markCommandSent(command.id, now, this.registry.resetRequested(command.nodeId, command.args.gpuUuid));
      } else if (now - command.createdAt > COMMAND_TIMEOUT_MS) {
        await this.store.finishCommand(command.id, false, now, {
          code: 'node_not_connected',
          message: `node ${command.nodeId} had no live session within ${COMMAND_TIMEOUT_MS / 1000} s`,
        });
      }
    }
    for (const command of await this.store.listCommands({ state: 'sent', limit: 1000 })) {
      if (now - (command.sentAt ?? command.createdAt) > COMMAND_TIMEOUT_MS) {
        await this.store.finishCommand(command.id, false, now, {
          code: 'no_result',
          message: `the agent did not answer within ${COMMAND_TIMEOUT_MS / 1000} s`,
        });
      }
    }
  }

  /** Records the answer to a stored command; false when the command is not one of ours. */
  async result(nodeId: string, result: CommandResult__Output): Promise<boolean> {
    const command = await this.store.getCommand(result.command_id);
    if (!command || command.nodeId !== nodeId) return false;
    const error = result.ok ? null : { code: result.error_code || 'failed', message: result.error_message };
    await this.store.finishCommand(command.id, result.ok, this.clock.now(), error);
    return true;
  }
}
