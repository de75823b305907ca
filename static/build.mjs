// build.mjs copies the pinned front-end files the dashboard loads from
// node_modules into dist/, where static/assets.go embeds them. Run it with
// `npm ci && npm run build` in static/. It copies nothing else: no
// third-party file is committed.
//
// Single files land flat in dist/ and get one hashed URL each. noVNC is ES
// modules importing each other by relative path, so its core/ and vendor/
// trees are copied as a folder, dist/novnc/, which assets.go hashes as a
// whole (see the package doc there).
import { copyFile, cp, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const files = [
  ['node_modules/htmx.org/dist/htmx.min.js', 'htmx.min.js'],
  // htmx 4's SSE extension (registers as "sse"; attribute hx-sse:connect).
  ['node_modules/htmx.org/dist/ext/hx-sse.min.js', 'hx-sse.min.js'],
  // The serial console: xterm.js 6 and its fit addon as ES modules (neither
  // imports anything), and xterm's stylesheet. Loaded on the console page only.
  ['node_modules/@xterm/xterm/lib/xterm.mjs', 'xterm.mjs'],
  ['node_modules/@xterm/xterm/css/xterm.css', 'xterm.css'],
  ['node_modules/@xterm/addon-fit/lib/addon-fit.mjs', 'addon-fit.mjs'],
  // The RDP console: IronRDP's web component (one ES module, no imports)
  // and its RDP backend (one ES module with the wasm inlined as a data:
  // URL, 6 MB). Loaded by rdp.js on the console page, when the user
  // connects.
  ['node_modules/@devolutions/iron-remote-desktop/iron-remote-desktop.js', 'iron-remote-desktop.js'],
  ['node_modules/@devolutions/iron-remote-desktop-rdp/iron-remote-desktop-rdp.js', 'iron-remote-desktop-rdp.js'],
];
// Trees: [from, to] folders copied whole (noVNC 1.7.0 ships no bundle).
const trees = [
  ['node_modules/@novnc/novnc/core', 'novnc/core'],
  ['node_modules/@novnc/novnc/vendor', 'novnc/vendor'],
  ['node_modules/@novnc/novnc/LICENSE.txt', 'novnc/LICENSE.txt'],
];

await mkdir(join(here, 'dist'), { recursive: true });
for (const [from, to] of files) {
  await copyFile(join(here, from), join(here, 'dist', to));
  console.log(`dist/${to} <- ${from}`);
}
// A stale file left in a tree would change its hash and be served: start clean.
await rm(join(here, 'dist', 'novnc'), { recursive: true, force: true });
for (const [from, to] of trees) {
  await cp(join(here, from), join(here, 'dist', to), {
    recursive: true,
    // Source maps and docs are not served.
    filter: (src) => !src.endsWith('.map') && !src.endsWith('.md'),
  });
  console.log(`dist/${to} <- ${from}`);
}
