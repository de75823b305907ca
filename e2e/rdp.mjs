// rdp.mjs drives the RDP console of an instance in headless Chromium:
//   node rdp.mjs <baseURL> <ref> <outdir>
// baseURL is https (a test certificate, which this browser ignores). It
// opens the console page, checks that the IronRDP files are not loaded
// before the user connects, signs in through the page's form, and waits
// until IronRDP's canvas shows the remote screen: more than one colour and
// a few hundred pixels off the background. It checks that the connection
// went through the server's proxy over wss, and saves screenshots to
// <outdir>. It exits non-zero on the first failed check.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, ref, outdir] = process.argv.slice(2);
if (!base || !ref || !outdir) {
  console.error('usage: node rdp.mjs <baseURL> <ref> <outdir>');
  process.exit(2);
}
await mkdir(outdir, { recursive: true });
const step = (msg) => console.log(`- ${msg}`);

const profile = await mkdtemp(join(tmpdir(), 'corral-e2e-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true, ignoreHTTPSErrors: true,
  viewport: { width: 1280, height: 900 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--ignore-certificate-errors',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
ctx.setDefaultTimeout(60000);
const problems = [];
const logs = [];
let code = 0;
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    logs.push(`${m.type()}: ${m.text()}`);
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const sockets = [];
  page.on('websocket', (ws) => sockets.push(ws.url()));

  await page.goto(`${base}/console/${ref}`);
  await page.waitForSelector('corral-rdp [data-testid="rdp-form"]');
  const early = requests.filter((u) => u.includes('iron-remote-desktop'));
  if (early.length) throw new Error(`IronRDP was loaded before the user connected: ${early.join(', ')}`);
  step('the console page offers RDP (the default for this instance) and loads IronRDP only on connect');

  await page.fill('[data-testid="rdp-username"]', 'corral');
  await page.fill('[data-testid="rdp-password"]', 'not-a-real-password');
  await page.click('[data-testid="rdp-connect"]');
  await page.waitForSelector('corral-rdp[data-state="connected"], corral-rdp[data-state="error"]');
  if (await page.locator('corral-rdp[data-state="error"]').count()) {
    throw new Error(`the RDP connection failed: ${await page.textContent('corral-rdp [data-testid="console-status"]')}`);
  }
  if (await page.inputValue('[data-testid="rdp-password"]') !== '') throw new Error('the password stayed in the form');
  const proxied = sockets.filter((u) => u.startsWith('wss://') && u.includes(`/ws/rdp/${ref}`));
  if (!proxied.length) throw new Error(`no wss connection to the proxy; sockets: ${sockets.join(', ')}`);
  step(`IronRDP connected through ${proxied[0]}`);

  // The remote screen: the canvas lives in the component's shadow root.
  let stats;
  const deadline = Date.now() + 60000;
  for (;;) {
    stats = await page.evaluate(() => {
      const c = document.querySelector('iron-remote-desktop')?.shadowRoot?.querySelector('canvas');
      if (!c || !c.width) return { width: 0, height: 0, colours: 0, other: 0 };
      const copy = document.createElement('canvas');
      copy.width = c.width; copy.height = c.height;
      const g = copy.getContext('2d');
      g.drawImage(c, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      const counts = new Map();
      for (let i = 0; i < d.length; i += 4) {
        const key = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      const top = Math.max(...counts.values());
      return { width: c.width, height: c.height, colours: counts.size, other: d.length / 4 - top, png: copy.toDataURL('image/png') };
    });
    if (stats.width > 0 && stats.colours > 1 && stats.other > 500) break;
    if (Date.now() > deadline) {
      throw new Error(`the RDP canvas stayed blank: ${stats.width}x${stats.height}, ${stats.colours} colours, ${stats.other} non-background pixels`);
    }
    await page.waitForTimeout(500);
  }
  await writeFile(join(outdir, 'rdp-canvas.png'), Buffer.from(stats.png.split(',')[1], 'base64'));
  await page.screenshot({ path: join(outdir, 'console-rdp.png') });
  step(`IronRDP shows the remote screen: ${stats.width}x${stats.height}, ${stats.colours} colours, ${stats.other} non-background pixels`);

  if (problems.length) throw new Error('browser reported problems:\n' + problems.join('\n'));
  console.log('ok');
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  console.error('browser console:\n' + logs.slice(-40).join('\n'));
  code = 1;
} finally {
  await ctx.close();
  await rm(profile, { recursive: true, force: true });
}
process.exit(code);
