// rdp.mjs drives the RDP console of an instance in headless Chromium:
//   node rdp.mjs <baseURL> <ref> <outdir> [straight|sheared]
// baseURL is https (a test certificate, which this browser ignores). It
// opens the console page, checks that the IronRDP files are not loaded
// before the user connects, signs in through the page's form, and waits
// until IronRDP's canvas shows xrdp's login dialog and holds still. It
// checks that the connection went through the server's proxy over wss and
// that the dialog is drawn straight (shear.mjs), then types into xrdp's
// password box and checks again. With "sheared" it requires the shear
// instead (the layout IronRDP 0.7.0 is known to shear: the check's own
// proof). It saves screenshots to <outdir> and exits non-zero on the
// first failed check.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canvasGeometry } from './shear.mjs';

// A sheared band turns every vertical edge in it into a slant of the
// same slope; text and curves make a stray slanted edge or two. So the
// picture is straight when no slope has more than MAX_PARALLEL edges
// slanted for MIN_ROWS rows or more. Measured at 1248x780: xrdp's straight
// login screen has at most 1 per slope; a sheared dialog 64-141 of one
// slope, a sheared password box alone 4.
const MIN_ROWS = 12;
const MAX_PARALLEL = 2;

const [base, ref, outdir, expect = 'straight'] = process.argv.slice(2);
if (!base || !ref || !outdir || !['straight', 'sheared'].includes(expect)) {
  console.error('usage: node rdp.mjs <baseURL> <ref> <outdir> [straight|sheared]');
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
  // Wait until xrdp's login dialog is drawn and the picture holds still.
  const settled = async (what, differentFrom) => {
    let last;
    let g;
    const deadline = Date.now() + 60000;
    for (;;) {
      g = await page.evaluate(canvasGeometry, MIN_ROWS);
      const done = g.found && g.colours > 1 && g.other > 500 && g.box.height >= 100 &&
        last?.sum === g.sum && g.sum !== differentFrom;
      if (done) return g;
      if (Date.now() > deadline) {
        throw new Error(`the RDP canvas did not settle on ${what}: ${g.width}x${g.height}, ${g.colours} colours, ${g.other} non-background pixels`);
      }
      last = g;
      await page.waitForTimeout(500);
    }
  };
  // straight checks the dialog's drawing: its vertical borders run its
  // whole height (a sheared bitmap breaks them into bands) and no slope
  // of 1-3 pixels per row has more than MAX_PARALLEL slanted edges.
  const straight = (g) => g.left >= 0.9 * g.box.height && g.right >= 0.9 * g.box.height &&
    Math.max(...Object.values(g.slants)) <= MAX_PARALLEL;
  const describe = (g) => `dialog ${g.box.width}x${g.box.height} at ${g.box.left},${g.box.top}: vertical borders ${g.left} and ${g.right} rows, ` +
    `${g.slanted} edges slanted for ${MIN_ROWS}+ rows (by slope ${JSON.stringify(g.slants)})`;
  const check = async (g, name, what) => {
    await writeFile(join(outdir, name), Buffer.from(g.png.split(',')[1], 'base64'));
    const ok = straight(g);
    if (expect === 'straight' && !ok) throw new Error(`${what} is sheared (${name}): ${describe(g)}`);
    if (expect === 'sheared' && ok) {
      throw new Error(`${what} is straight (${name}) where IronRDP was expected to shear it: ${describe(g)}; ` +
        'if IronRDP now crops padded bitmaps, drop the aligned-layout workaround (docs/consoles.md)');
    }
    step(`${what} is ${ok ? 'straight' : 'sheared, as expected'}: ${describe(g)}`);
  };

  const first = await settled('the login screen');
  step(`IronRDP shows the remote screen: ${first.width}x${first.height}, ${first.colours} colours, ${first.other} non-background pixels`);
  await page.screenshot({ path: join(outdir, 'console-rdp.png') });
  await check(first, 'rdp-canvas.png', 'the login screen');

  // Type into xrdp's focused password box: xrdp repaints the box alone,
  // as a bitmap as wide as the box.
  await page.locator('iron-remote-desktop').click({ position: { x: 3, y: 3 } });
  await page.keyboard.type('hunter2', { delay: 30 });
  const typed = await settled('the typed password', first.sum);
  await check(typed, 'rdp-typed.png', 'the login screen after typing');

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
