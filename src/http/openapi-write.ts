/** `npm run openapi`: regenerates manifest/openapi.json from the zod schemas. */
import { writeFileSync } from 'node:fs';
import { buildOpenApiDocument } from './openapi.js';

const path = new URL('../../manifest/openapi.json', import.meta.url);
writeFileSync(path, `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`);
process.stdout.write(`wrote ${path.pathname}\n`);
