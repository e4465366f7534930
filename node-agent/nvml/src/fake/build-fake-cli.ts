// `npm run fake:build -w node-nvml-bindings [-- <outDir>]`: builds the fake
// libnvidia-ml.so.1 and prints its path, e.g. for SVC_NVML_LIBRARY in dev mode.
import { buildFakeNvml } from './build-fake.js';

console.log(await buildFakeNvml(process.argv[2]));
