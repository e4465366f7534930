// Commands for agents that travel through the store, sent by the process holding the
// node's stream. Operator commands: svcctl (another process) or any replica writes a
// pending row; the holder sends it on the node's live session and records the agent's
// CommandResult; a command that finds no session, or gets no answer, fails after
// COMMAND_TIMEOUT_MS. Relayed task commands: another replica queued a StartTask or
// StopTask for a node this process holds (agents/session-relay.ts); the holder takes and
// sends them, oldest first. Both are polled about once a second and, on PostgreSQL, at
// once when the store announces them (poll()).
import type { Clock } from '@svc/shared';
import type { Command, CommandResult__Output } from '@svc/proto';
import type { NodeRegistry, RegistryLogger } from '../nodes/node-registry.js';
import type { NodeCommandRecord, NodeStore } from '../store/node-store.js';
import type { AgentSession } from './session.js';

export const COMMAND_POLL_MS = 1000;
export const COMMAND_TIMEOUT_MS = 60_000;
/**
 * A relayed command nobody took within this is dropped: its node had no session on any
 * replica, and the node's next Hello re-sends whatever still matters (the lifecycle
 * table), so an old start or stop must not arrive after it.
 */
export const RELAYED_COMMAND_TTL_MS = 30_000;

/** The wire form of a stored command (pure). */
export function toWireCommand(command: NodeCommandRecord): Command {
  switch (command.kind) {
    case 'reset_gpu_health':
      return { command_id: command.id, reset_gpu_health: { gpu_uuid: command.args.gpuUuid } };
    case 'reset_gpu':
      return { command_id: command.id, reset_gpu: { gpu_uuid: command.args.gpuUuid } };
  }
}

export class CommandDispatcher {
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;
  /** A poll was asked for while one ran (its reads may be older than the news): run again after it. */
  private again = false;

  constructor(
    private readonly store: NodeStore,
    private readonly registry: NodeRegistry,
    private readonly clock: Clock,
    private readonly sessionFor: (nodeId: string) => AgentSession | undefined,
    private readonly log: RegistryLogger,
    private readonly pollMs = COMMAND_POLL_MS,
    /** The nodes whose session this process holds, when commands may be relayed to it (several replicas); null: one process. */
    private readonly heldNodes: (() => string[]) | null = null,
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

  /** Sends what is pending and fails what timed out. One poll at a time; one asked for during another runs after it. */
  poll(): Promise<void> {
    if (this.polling) {
      this.again = true;
      return this.polling;
    }
    this.polling = (async () => {
      do {
        this.again = false;
        await this.pollNow();
      } while (this.again);
    })().finally(() => {
      this.polling = null;
    });
    return this.polling;
  }

  private async pollNow(): Promise<void> {
    const now = this.clock.now();
    if (this.heldNodes) await this.sendRelayed(now);
    for (const command of await this.store.listCommands({ state: 'pending', limit: 1000 })) {
      const session = this.sessionFor(command.nodeId);
      if (session?.sendCommand(toWireCommand(command))) {
        const sent = this.registry.resetRequested(command.nodeId, command.args.gpuUuid);
        if (command.kind === 'reset_gpu') sent.message = `GPU reset sent to the agent (${command.id})`;
        await this.store.markCommandSent(command.id, now, sent);
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

  /** Takes the task commands other replicas queued for nodes held here and sends them in order. */
  private async sendRelayed(now: number): Promise<void> {
    for (const relayed of await this.store.takeRelayedCommands(this.heldNodes!(), now - RELAYED_COMMAND_TTL_MS)) {
      const command = JSON.parse(relayed.command) as Command;
      // The session ended since: the node's next Hello re-sends what still matters.
      if (!this.sessionFor(relayed.nodeId)?.sendCommand(command)) {
        this.log.warn({ node: relayed.nodeId, command: command.command_id }, 'relayed command dropped: the session ended before it could be sent');
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
