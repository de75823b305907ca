// folders.mjs drives the folder tree in headless Chromium:
//   node folders.mjs <baseURL> <outdir>
// It creates a folder with the form, drags two running VMs of one context
// onto it (HTML5 drag-and-drop), filters the table by the folder, runs a
// bulk stop on it and checks every member's result and the live table,
// then drags the folder under another, and previews a move of one of the
// members from its page: on the demo fleet the simulated backends neither
// hand over nor import disks, so the preflight (an htmx partial) lists
// refusals and the commit button stays disabled. Exits non-zero on the
// first failed check.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outdir] = process.argv.slice(2);
if (!base || !outdir) {
  console.error('usage: node folders.mjs <baseURL> <outdir>');
  process.exit(2);
}
await mkdir(outdir, { recursive: true });
const tid = (id) => `[data-testid="${id}"]`;
const step = (msg) => console.log(`- ${msg}`);
const folder = (p) => `${tid('folder')}[data-folder="${p}"]`;

const profile = await mkdtemp(join(tmpdir(), 'corral-e2e-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true,
  viewport: { width: 1366, height: 900 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
ctx.setDefaultTimeout(60000);
const problems = [];
let code = 0;
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  await page.goto(`${base}/?state=running&context=sim%2Flab`);
  await page.waitForSelector(`${tid('live')}.on`);
  await page.evaluate(() => { window.__corralMark = 'kept'; });

  // A folder through the visible form.
  await page.fill(tid('folder-create-path'), 'e2e/web');
  await page.click(`${tid('folder-create')} button`);
  await page.waitForSelector(folder('e2e/web'));
  step('created folder e2e/web with the form');

  // Drag two running VMs onto it.
  const rows = page.locator(`${tid('instance-row')}[data-state="running"]`);
  const refs = [await rows.nth(0).getAttribute('data-ref'), await rows.nth(1).getAttribute('data-ref')];
  for (const [i, ref] of refs.entries()) {
    await page.locator(`${tid('instance-row')}[data-ref="${ref}"] ${tid('instance-link')}`).dragTo(page.locator(`${folder('e2e/web')} > ${tid('folder-link')}`));
    await page.waitForFunction(([sel, n]) => document.querySelector(sel)?.textContent === String(n),
      [`${folder('e2e/web')} > [data-testid="folder-count"]`, i + 1]);
    step(`dragged ${ref} into e2e/web`);
  }
  if (await page.evaluate(() => window.__corralMark) !== 'kept') throw new Error('a drop reloaded the page');
  await page.screenshot({ path: join(outdir, 'folders-dropped.png'), fullPage: true });

  // The folder's inventory.
  await page.click(`${folder('e2e')} > ${tid('folder-link')}`);
  await page.waitForURL(/folder=e2e/);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="instance-row"]').length === n, 2);
  const shown = await page.locator(tid('instance-row')).evaluateAll((rs) => rs.map((r) => r.dataset.ref).sort());
  if (JSON.stringify(shown) !== JSON.stringify([...refs].sort())) throw new Error(`folder e2e shows ${shown}, want ${refs}`);
  step('the folder filter shows exactly its two members');

  // Bulk stop on the parent folder.
  await page.click(`${folder('e2e')} > details > ${tid('folder-menu')}`);
  await page.selectOption(`${folder('e2e')} > details ${tid('folder-bulk-action')}`, 'stop');
  await page.click(`${folder('e2e')} > details ${tid('folder-bulk-run')}`);
  await page.waitForSelector(`${tid('bulk-results')}[data-action="stop"][data-path="e2e"]`);
  for (const ref of refs) {
    const outcome = await page.locator(`${tid('bulk-result')}[data-ref="${ref}"]`).getAttribute('data-outcome');
    if (outcome !== 'ok') throw new Error(`bulk stop of ${ref}: ${outcome}`);
    await page.waitForSelector(`tr[data-ref="${ref}"][data-state="stopped"]`);
    await page.waitForSelector(`${tid('activity')} ${tid('task')}[data-action="stop"][data-target="${ref}"][data-status="done"]`);
  }
  const summary = await page.locator(tid('bulk-summary')).innerText();
  if (!summary.includes('2 ok, 0 skipped, 0 failed')) throw new Error(`summary: ${summary}`);
  step(`bulk stop: ${summary}; the table and the activity panel show both stopped`);
  await page.screenshot({ path: join(outdir, 'folders-bulk-stop.png'), fullPage: true });

  // Drag e2e/web onto a new top-level folder: it becomes ops/web.
  await page.fill(tid('folder-create-path'), 'ops');
  await page.click(`${tid('folder-create')} button`);
  await page.waitForSelector(folder('ops'));
  await page.locator(`${folder('e2e/web')} > ${tid('folder-link')}`).dragTo(page.locator(`${folder('ops')} > ${tid('folder-link')}`));
  await page.waitForSelector(folder('ops/web'));
  if (await page.locator(folder('e2e/web')).count() !== 0) throw new Error('e2e/web is still there after the drag');
  step('dragged folder e2e/web under ops');

  // Preview a move of the first member from its page.
  await page.goto(`${base}/vm/${refs[0]}`);
  await page.waitForSelector(tid('vm-state'));
  await page.click(tid('move-open'));
  await page.waitForSelector(`${tid('move-commit')}[disabled]`);
  await page.evaluate(() => { window.__corralMark = 'kept'; });
  const dests = await page.locator(`${tid('move-dest')} option`).evaluateAll((os) => os.map((o) => o.value).filter(Boolean));
  if (dests.length === 0) throw new Error('the move dialog offers no destination');
  await page.selectOption(tid('move-dest'), dests[0]);
  await page.waitForSelector(tid('move-refusal'));
  const refusals = await page.locator(tid('move-refusal')).allInnerTexts();
  if (!(await page.locator(tid('move-commit')).isDisabled())) throw new Error('the commit button is enabled while the preflight refuses');
  if (await page.evaluate(() => window.__corralMark) !== 'kept') throw new Error('the preflight reloaded the page');
  await page.screenshot({ path: join(outdir, 'move-preflight.png'), fullPage: true });
  step(`move preview of ${refs[0]} to ${dests[0]} refused: ${refusals.join(' | ')}`);

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
