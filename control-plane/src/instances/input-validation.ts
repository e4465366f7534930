// Pure checks of instance inputs that JSON Schema cannot express: OCI image references,
// OpenSSH public keys and labels. Each returns a problem string, or undefined when fine.
import { imageIdProblem } from '@svc/shared/image-id';
import { readSshStrings, rsaKeyProblem } from '@svc/shared/ssh-key';

// distribution/reference grammar: [host[:port]/]path[:tag][@digest]; path lowercase.
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*';
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const DOMAIN_ONLY = new RegExp(`^${DOMAIN}$`);
const REMAINDER = new RegExp(`^${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::${TAG})?(?:@${DIGEST})?$`);

export function imageReferenceProblem(ref: string): string | undefined {
  if (ref.length > 512) return 'image reference is longer than 512 characters';
  const byId = imageIdProblem(ref);
  if (byId) return byId;
  const invalid = `"${ref}" is not a valid OCI image reference (e.g. registry.example.com/team/image:tag)`;
  // As Docker decides: the first component is a registry host only if it has a dot or a
  // port, or is "localhost"; otherwise the whole reference is a (lowercase) path.
  const slash = ref.indexOf('/');
  const first = slash === -1 ? '' : ref.slice(0, slash);
  const isHost = first !== '' && (/[.:]/.test(first) || first === 'localhost' || first.startsWith('['));
  if (isHost && !DOMAIN_ONLY.test(first)) return invalid;
  return REMAINDER.test(isHost ? ref.slice(slash + 1) : ref) ? undefined : invalid;
}

const SSH_KEY_TYPES = new Set([
  'ssh-ed25519',
  'ssh-rsa',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'sk-ssh-ed25519@openssh.com',
  'sk-ecdsa-sha2-nistp256@openssh.com',
]);

/** An OpenSSH `authorized_keys` line: `<type> <base64 blob> [comment]`, blob matching its type. */
export function sshPublicKeyProblem(line: string): string | undefined {
  const parts = line.trim().split(/\s+/);
  const [type, data] = parts;
  if (!type || !data) return 'expected "<type> <base64> [comment]", as in ~/.ssh/id_ed25519.pub';
  if (!SSH_KEY_TYPES.has(type)) return `unsupported key type "${type}"; use ed25519, ECDSA or RSA`;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(data)) return 'the key data is not base64';
  const blob = Buffer.from(data, 'base64');
  const fields = readSshStrings(blob, type === 'ssh-rsa' ? 3 : 1);
  if (!fields || fields[0]!.toString('latin1') !== type) return `the key data does not hold a ${type} key`;
  return type === 'ssh-rsa' ? rsaKeyProblem(fields[1]!, fields[2]!) : undefined;
}

export const MAX_LABELS = 64;
const LABEL_KEY = /^[a-zA-Z0-9][a-zA-Z0-9._/-]{0,62}$/;
const MAX_LABEL_VALUE = 256;

const CONTROL_OR_LONE_SURROGATE = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Problems as [param, message]; labels are for cost attribution, so keep them tidy. */
export function labelProblem(labels: Record<string, unknown>): [string, string] | undefined {
  const entries = Object.entries(labels);
  if (entries.length > MAX_LABELS) return ['labels', `at most ${MAX_LABELS} labels; got ${entries.length}`];
  for (const [key, value] of entries) {
    if (!LABEL_KEY.test(key)) return [`labels.${key}`, 'label keys are 1-63 letters, digits, ".", "_", "/" or "-", starting with a letter or digit'];
    if (typeof value !== 'string') return [`labels.${key}`, 'label values must be strings'];
    if (value.length > MAX_LABEL_VALUE) return [`labels.${key}`, `label values are at most ${MAX_LABEL_VALUE} characters`];
    // Labels group usage and invoices (PostgreSQL's jsonb refuses NUL and half a surrogate pair).
    if (CONTROL_OR_LONE_SURROGATE.test(value)) return [`labels.${key}`, 'label values may not hold control characters or unpaired UTF-16 surrogates'];
  }
  return undefined;
}
