// build.mjs copies the pinned front-end files the dashboard loads from
// node_modules into dist/, where static/assets.go embeds them. Run it with
// `npm ci && npm run build` in static/. It copies nothing else: no
// third-party file is committed.
import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const files = [
  ['node_modules/htmx.org/dist/htmx.min.js', 'htmx.min.js'],
  // htmx 4's SSE extension (registers as "sse"; attribute hx-sse:connect).
  ['node_modules/htmx.org/dist/ext/hx-sse.min.js', 'hx-sse.min.js'],
];

await mkdir(join(here, 'dist'), { recursive: true });
for (const [from, to] of files) {
  await copyFile(join(here, from), join(here, 'dist', to));
  console.log(`dist/${to} <- ${from}`);
}
