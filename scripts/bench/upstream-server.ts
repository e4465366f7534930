// A bench helper process: the minimal, fast OpenAI-compatible upstream, so the control
// plane's overhead is measured against a replica that is never the bottleneck. Prints
// {port} when ready and exits when its stdin closes.
import { startOpenAiUpstream } from '../../test/support/openai-upstream.js';
import { serveUntilStopped } from './helper-process.js';

const upstream = await startOpenAiUpstream({ name: 'bench', record: false, dimension: 768 });
serveUntilStopped({ baseUrl: upstream.baseUrl }, () => upstream.close());
