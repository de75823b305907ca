// move.mjs previews a cold move in headless Chromium:
//   node move.mjs <baseURL> <vmPath> <outdir>
// It opens the VM page, opens the move dialog, chooses a destination and
// waits for the htmx preflight partial: it must list refusals, with the
// commit button disabled, without a page reload. Exits non-zero on the
// first failed check.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, vmPath, outdir] = process.argv.slice(2);
if (!base || !vmPath || !outdir) {
  console.error('usage: node move.mjs <baseURL> <vmPath> <outdir>');
  process.exit(2);
}
await mkdir(outdir, { recursive: true });
const tid = (id) => `[data-testid="${id}"]`;
const profile = await mkdtemp(join(tmpdir(), 'corral-e2e-move-'));
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
  await page.goto(base + vmPath);
  await page.click(tid('move-open'));
  await page.waitForSelector(`${tid('move-commit')}[disabled]`);
  await page.evaluate(() => { window.__corralMark = 'kept'; });
  const options = await page.locator(`${tid('move-dest')} option`).evaluateAll((os) => os.map((o) => o.value).filter(Boolean));
  if (options.length === 0) throw new Error('the move dialog offers no destination');
  await page.selectOption(tid('move-dest'), options[0]);
  await page.waitForSelector(tid('move-refusal'));
  const refusals = await page.locator(tid('move-refusal')).allInnerTexts();
  console.log(`- preflight to ${options[0]} refused: ${refusals.join(' | ')}`);
  if (!(await page.locator(tid('move-commit')).isDisabled())) throw new Error('the commit button is enabled while the preflight refuses');
  if (await page.evaluate(() => window.__corralMark) !== 'kept') throw new Error('the preflight reloaded the page');
  await page.screenshot({ path: join(outdir, 'move-preflight.png'), fullPage: true });
  if (problems.length) throw new Error(problems.join('\n'));
  console.log('- ok');
} catch (e) {
  console.error(e.stack || String(e));
  code = 1;
} finally {
  await ctx.close();
}
process.exit(code);
