// console.mjs drives the consoles of a running guest in headless Chromium:
//   node console.mjs <baseURL> <ref> <outdir>
// It checks that the dashboard loads no console script, that noVNC shows
// the guest's screen (a canvas that is not one flat colour), that xterm.js
// round-trips a shell command, that a second viewer of the serial console
// sees the history and the live output while the first keeps working, and
// that switching the first page to VNC (an htmx swap) closes its serial
// socket without disturbing the second. Screenshots go to <outdir>. It
// exits non-zero on the first failed check.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, ref, outdir] = process.argv.slice(2);
if (!base || !ref || !outdir) {
  console.error('usage: node console.mjs <baseURL> <ref> <outdir>');
  process.exit(2);
}
await mkdir(outdir, { recursive: true });
const step = (msg) => console.log(`- ${msg}`);

const profile = await mkdtemp(join(tmpdir(), 'corral-e2e-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true,
  viewport: { width: 1280, height: 900 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
ctx.setDefaultTimeout(30000);
const problems = [];
function watch(page, name) {
  page.on('pageerror', (e) => problems.push(`${name}: page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`${name}: console: ${m.text()}`); });
}

// The terminal's text, one string per buffer line.
const lines = (page) => page.evaluate(() => {
  const b = document.querySelector('corral-serial').term.buffer.active;
  const out = [];
  for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? '');
  return out;
});
// waitOutput waits for a line that holds want and is not the command line.
async function waitOutput(page, want, name) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const got = await lines(page);
    if (got.some((l) => l.includes(want) && !l.includes('echo'))) return;
    if (Date.now() > deadline) throw new Error(`${name}: "${want}" never showed; terminal:\n${got.filter(Boolean).join('\n')}`);
    await page.waitForTimeout(200);
  }
}
async function typeInto(page, text) {
  await page.locator('corral-serial .xterm').click();
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

let code = 0;
try {
  // The dashboard loads none of the consoles' files.
  const dash = ctx.pages()[0] ?? await ctx.newPage();
  watch(dash, 'dashboard');
  const dashURLs = [];
  dash.on('request', (r) => dashURLs.push(r.url()));
  await dash.goto(`${base}/`);
  // Not 'networkidle': the live-update stream stays open.
  await dash.waitForLoadState('load');
  await dash.waitForTimeout(1000);
  const leaked = dashURLs.filter((u) => /console|novnc|xterm|addon-fit/.test(u));
  if (leaked.length) throw new Error(`the dashboard loads console files: ${leaked.join(', ')}`);
  step(`the dashboard loads no console script (${dashURLs.length} requests)`);

  // VNC: the guest's screen.
  const vnc = await ctx.newPage();
  watch(vnc, 'vnc');
  await vnc.goto(`${base}/console/${ref}?kind=vnc`);
  await vnc.waitForSelector('corral-vnc[data-state="connected"]');
  await vnc.waitForSelector('corral-vnc canvas');
  let stats;
  const deadline = Date.now() + 60000;
  for (;;) {
    stats = await vnc.evaluate(() => {
      const c = document.querySelector('corral-vnc canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const counts = new Map();
      let sum = 0, sum2 = 0;
      for (let i = 0; i < d.length; i += 4) {
        const key = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
        counts.set(key, (counts.get(key) ?? 0) + 1);
        const y = 0.2126 * d[i] + 0.7152 * d[i + 1] + 0.0722 * d[i + 2];
        sum += y; sum2 += y * y;
      }
      const n = d.length / 4;
      const top = Math.max(...counts.values());
      return { width: c.width, height: c.height, colours: counts.size, other: n - top,
        stddev: Math.sqrt(Math.max(0, sum2 / n - (sum / n) ** 2)), png: c.toDataURL('image/png') };
    });
    // A blank console is one colour; the guest's banner is a few hundred
    // lit pixels of text at least.
    if (stats.width > 0 && stats.colours >= 2 && stats.other > 200 && stats.stddev > 1) break;
    if (Date.now() > deadline) {
      throw new Error(`the VNC canvas stayed blank: ${stats.width}x${stats.height}, ${stats.colours} colours, ${stats.other} non-background pixels, luminance stddev ${stats.stddev.toFixed(2)}`);
    }
    await vnc.waitForTimeout(500);
  }
  await writeFile(join(outdir, 'vnc-canvas.png'), Buffer.from(stats.png.split(',')[1], 'base64'));
  await vnc.screenshot({ path: join(outdir, 'console-vnc.png') });
  step(`noVNC shows the guest: ${stats.width}x${stats.height}, ${stats.colours} colours, ${stats.other} non-background pixels, stddev ${stats.stddev.toFixed(1)}`);

  // Serial: a command round trip.
  const a = await ctx.newPage();
  watch(a, 'serial-a');
  await a.goto(`${base}/console/${ref}?kind=serial`);
  await a.waitForSelector('corral-serial[data-state="connected"]');
  await a.waitForSelector('corral-serial .xterm');
  await typeInto(a, 'echo corral-$((6*7))');
  await waitOutput(a, 'corral-42', 'first viewer');
  await a.screenshot({ path: join(outdir, 'console-serial.png') });
  step('xterm.js round-tripped echo corral-$((6*7)) -> corral-42');

  // A second viewer: it gets the history, and both see and type.
  const b = await ctx.newPage();
  watch(b, 'serial-b');
  await b.goto(`${base}/console/${ref}?kind=serial`);
  await b.waitForSelector('corral-serial[data-state="connected"]');
  await waitOutput(b, 'corral-42', 'second viewer (scrollback)');
  step('the second viewer was sent the history');
  await typeInto(a, 'echo again-$((5*5))');
  await waitOutput(a, 'again-25', 'first viewer, typing after the second joined');
  await waitOutput(b, 'again-25', 'second viewer, output typed in the first');
  await typeInto(b, 'echo bee-$((2*4))');
  await waitOutput(b, 'bee-8', 'second viewer, its own command');
  await waitOutput(a, 'bee-8', 'first viewer, output typed in the second');
  await b.screenshot({ path: join(outdir, 'console-serial-second.png') });
  step('both serial viewers see all output and both can type');

  // Switch the first page to VNC through htmx: its serial element leaves
  // the document and closes its socket; the second viewer carries on.
  await a.evaluate(() => { window.__corralMark = 'kept'; });
  await a.click('[data-testid="console-kind-vnc"]');
  await a.waitForSelector('corral-vnc[data-state="connected"]');
  if (await a.locator('corral-serial').count() !== 0) throw new Error('the serial element is still on the page');
  if (await a.evaluate(() => window.__corralMark) !== 'kept') throw new Error('switching the kind reloaded the page');
  if (!a.url().includes('kind=vnc')) throw new Error(`the switch did not push its URL: ${a.url()}`);
  await typeInto(b, 'echo after-$((3*3))');
  await waitOutput(b, 'after-9', 'second viewer after the first left');
  await a.screenshot({ path: join(outdir, 'console-switched-to-vnc.png') });
  step('switching kinds swapped the element in place; the other viewer kept working');

  if (problems.length) throw new Error('browser reported problems:\n' + problems.join('\n'));
  console.log('ok');
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  code = 1;
} finally {
  await ctx.close();
  await rm(profile, { recursive: true, force: true });
}
process.exit(code);
