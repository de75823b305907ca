// login.mjs signs in to Corral in headless Chromium through a real OpenID
// provider:
//   node login.mjs <baseURL> <outdir>
// The server requires authentication; bob (not an admin) is sent to the
// provider's login page, signs in, lands on the dashboard showing his
// login, sees no power buttons on a VM page and signs out; alice (an
// admin) then sees them. Screenshots go to <outdir>. It exits non-zero on
// the first failed check.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outdir] = process.argv.slice(2);
if (!base || !outdir) {
  console.error('usage: node login.mjs <baseURL> <outdir>');
  process.exit(2);
}
await mkdir(outdir, { recursive: true });
const tid = (id) => `[data-testid="${id}"]`;
const step = (msg) => console.log(`- ${msg}`);

const profile = await mkdtemp(join(tmpdir(), 'corral-e2e-login-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true,
  viewport: { width: 1366, height: 900 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
// Generous: CI runs the packages in parallel on two cores, and a wait
// ends as soon as its condition holds.
ctx.setDefaultTimeout(60000);
const problems = [];
const page = ctx.pages()[0] ?? await ctx.newPage();
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

async function signIn(user, password) {
  await page.goto(`${base}/`);
  await page.waitForSelector(tid('login-start'));
  if (new URL(page.url()).pathname !== '/login') throw new Error(`anonymous / went to ${page.url()}, want /login`);
  await page.click(tid('login-start'));
  await page.waitForSelector(tid('op-username'));
  if (new URL(page.url()).origin === new URL(base).origin) throw new Error('the sign-in did not go to the provider');
  await page.screenshot({ path: join(outdir, `provider-login-${user.split('@')[0]}.png`) });
  await page.fill(tid('op-username'), user);
  await page.fill(tid('op-password'), password);
  await page.click(tid('op-submit'));
  await page.waitForSelector(tid('instance-row'));
  const shown = await page.locator(tid('user-login')).innerText();
  if (!shown.includes(user)) throw new Error(`the dashboard shows "${shown}", want ${user}`);
  step(`${user} signed in and sees "${shown}"`);
}

async function openVM() {
  const href = await page.locator(tid('instance-link')).first().getAttribute('href');
  await page.goto(base + href);
  await page.waitForSelector(tid('vm-state'));
  return href;
}

let code = 0;
try {
  await signIn('bob@example.com', 'bob-pw');
  await page.screenshot({ path: join(outdir, 'dashboard-bob.png'), fullPage: true });
  if (await page.locator(tid('read-only')).count() !== 1) throw new Error('bob is not marked read only');
  await openVM();
  if (await page.locator(tid('actions')).count() !== 0) throw new Error('a non-admin sees power buttons');
  await page.waitForSelector(tid('actions-read-only'));
  await page.screenshot({ path: join(outdir, 'vm-bob.png'), fullPage: true });
  step('bob sees no power or delete buttons');

  await page.click(tid('logout'));
  await page.waitForSelector(tid('login-start'));
  await page.goto(`${base}/`);
  await page.waitForSelector(tid('login-start'));
  step('bob signed out: the dashboard asks to sign in again');

  await signIn('alice@example.com', 'alice-pw');
  await openVM();
  await page.waitForSelector(tid('actions'));
  if (await page.locator(tid('action-delete')).count() !== 1) throw new Error('the admin sees no delete button');
  await page.screenshot({ path: join(outdir, 'vm-alice.png'), fullPage: true });
  step('alice (admin) sees the power buttons');

  if (problems.length) throw new Error('browser reported problems:\n' + problems.join('\n'));
  console.log('ok');
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  await page.screenshot({ path: join(outdir, 'failure.png'), fullPage: true }).catch(() => {});
  code = 1;
} finally {
  await ctx.close();
  await rm(profile, { recursive: true, force: true });
}
process.exit(code);
