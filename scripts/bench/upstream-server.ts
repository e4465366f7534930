// A bench helper process: the minimal, fast OpenAI-compatible upstream, so the control
// plane's overhead is measured against a replica that is never the bottleneck. Prints
// {port} when ready and exits when its stdin closes.
import { startOpenAiUpstream } from '../../test/support/openai-upstream.js';

const upstream = await startOpenAiUpstream({ name: 'bench', record: false, dimension: 768 });
process.stdout.write(`${JSON.stringify({ baseUrl: upstream.baseUrl })}\n`);
const shutdown = (): void => void upstream.close().finally(() => process.exit(0));
process.stdin.on('end', shutdown);
process.stdin.resume();
process.on('SIGTERM', shutdown);
