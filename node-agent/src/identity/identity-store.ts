// The node identity the control plane issued at enrollment, persisted in the agent's data
// dir (identity.json, mode 0600: the node secret is a credential) so a restarted agent is
// the same node. Written to a temporary file and renamed, so a crash never leaves half.
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface NodeIdentity {
  node_id: string;
  node_secret: string;
  /** The control plane that issued it, for the operator's benefit. */
  control_plane: string;
  enrolled_at: string;
}

export class IdentityFileError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'IdentityFileError';
  }
}

export function identityPath(dataDir: string): string {
  return join(dataDir, 'identity.json');
}

/** The stored identity, or undefined when the agent has not enrolled yet. Throws on a corrupt file. */
export async function readIdentity(dataDir: string): Promise<NodeIdentity | undefined> {
  const path = identityPath(dataDir);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new IdentityFileError(`cannot read the node identity ${path}: ${(err as Error).message}`, { cause: err });
  }
  let parsed: Partial<NodeIdentity>;
  try {
    parsed = JSON.parse(text) as Partial<NodeIdentity>;
  } catch (err) {
    throw new IdentityFileError(`the node identity ${path} is not valid JSON; remove it and enroll again`, { cause: err });
  }
  if (typeof parsed.node_id !== 'string' || !parsed.node_id || typeof parsed.node_secret !== 'string' || !parsed.node_secret) {
    throw new IdentityFileError(`the node identity ${path} lacks node_id or node_secret; remove it and enroll again`);
  }
  return {
    node_id: parsed.node_id,
    node_secret: parsed.node_secret,
    control_plane: parsed.control_plane ?? '',
    enrolled_at: parsed.enrolled_at ?? '',
  };
}

export async function writeIdentity(dataDir: string, identity: NodeIdentity): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const path = identityPath(dataDir);
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(identity, null, 2)}\n`, { mode: 0o600 });
  // The mode given to writeFile is masked by the umask; make sure.
  await chmod(temporary, 0o600);
  await rename(temporary, path);
}
