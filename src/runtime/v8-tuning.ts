/**
 * Heap settings for a long-running Herald, applied before anything else is loaded (main.ts
 * imports this module first: an ES module's imports run in order, before its own body).
 *
 * V8 grows the old space, after each full collection, to a multiple of what is alive there — up
 * to four times under a high allocation rate. With ~35 MB alive, 5,000 deliveries left Herald at
 * ~200 MB resident; growing by a quarter measured ~143 MB for the same work at the same rate,
 * with more frequent but smaller collections (README "Benchmarks"). The heap's maximum is
 * unchanged, so a large fan-out still fits.
 *
 * The young generation is left at V8's size (up to 32 MB under load on Node 20, 128 MB on Node 24;
 * runtime/memory-trim.ts gives it back once Herald is idle): capping it at 8 MB saved
 * another ~25 MB resident after a fan-out but cost about a tenth of the delivery rate and of the
 * API's throughput in collections, measured the same way. An operator who prefers the memory
 * starts Herald with V8's own flag, read at start-up: `NODE_OPTIONS=--max-semi-space-size=4`.
 * A setting an operator gives Node (NODE_OPTIONS or node's command line) wins over this one.
 */
import { setFlagsFromString } from 'node:v8';

const given = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`;
if (!/heap-growing-percent/.test(given)) setFlagsFromString('--heap-growing-percent=25');
