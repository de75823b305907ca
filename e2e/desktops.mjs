// desktops.mjs drives the desktops page of the VDI broker in headless
// Chromium, signed in through a real OpenID provider:
//   node desktops.mjs <baseURL> <outdir> <desktop> <memberRef> <marker>
// The pool has one member (a real QEMU guest). alice gets it, connects
// (the console shows in the page: noVNC's canvas is not blank, the serial
// fallback shows the guest's marker), and the page says she is connected;
// bob, signed in meanwhile, sees the pool full and gets 403 from a direct
// GET of the desktop's console, its WebSocket and its connect answer;
// alice releases, bob's page updates by itself, and bob gets the same
// desktop; the admin sees it on the pools page and force-releases it.
// Screenshots go to <outdir>. It exits non-zero on the first failed check.
import { chromium } from 'playwright-core';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';

const [base, outdir, desktop, ref, marker] = process.argv.slice(2);
if (!base || !outdir || !desktop || !ref || !marker) {
  console.error('usage: node desktops.mjs <baseURL> <outdir> <desktop> <memberRef> <marker>');
  process.exit(2);
}
await mkdir(outdir, { recursive: true });
const tid = (id) => `[data-testid="${id}"]`;
const step = (msg) => console.log(`- ${msg}`);
const shot = (page, name) => page.screenshot({ path: join(outdir, name + '.png'), fullPage: true });

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const problems = [];

// signIn opens a browser context of its own for user (separate cookies)
// and signs in at the provider.
async function signIn(user, password) {
  const ctx = await browser.newContext({ viewport: { width: 1366, height: 1000 } });
  ctx.setDefaultTimeout(90000);
  const page = await ctx.newPage();
  const who = user.split('@')[0];
  page.on('pageerror', (e) => problems.push(`${who}: page error: ${e.message}`));
  await page.goto(`${base}/desktops`);
  await page.waitForSelector(tid('login-start'));
  await page.click(tid('login-start'));
  await page.waitForSelector(tid('op-username'));
  await page.fill(tid('op-username'), user);
  await page.fill(tid('op-password'), password);
  await page.click(tid('op-submit'));
  await page.waitForSelector(tid('user-login'));
  if (new URL(page.url()).pathname !== '/desktops') await page.goto(`${base}/desktops`);
  await page.waitForSelector(tid('desktop-pools'));
  if (await page.locator(tid('nav-desktops')).count() !== 1) throw new Error(`${who}: no Desktops link in the navigation`);
  step(`${user} signed in and opened /desktops`);
  return page;
}

const freeText = (page) => page.locator(`${tid('pool-row')} ${tid('pool-free')}`).innerText();
async function waitFree(page, want, who) {
  const deadline = Date.now() + 90000;
  for (;;) {
    const got = (await freeText(page)).trim();
    if (got === want) return;
    if (Date.now() > deadline) throw new Error(`${who}: the pool shows "${got}" free, want "${want}"`);
    await page.waitForTimeout(250);
  }
}

// canvasStats measures noVNC's canvas in the console frame.
async function vncShows(frame) {
  await frame.waitForSelector('corral-vnc[data-state="connected"]');
  await frame.waitForSelector('corral-vnc canvas');
  const deadline = Date.now() + 90000;
  for (;;) {
    const s = await frame.evaluate(() => {
      const c = document.querySelector('corral-vnc canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const counts = new Map();
      for (let i = 0; i < d.length; i += 4) {
        const key = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      const n = d.length / 4;
      return { width: c.width, height: c.height, colours: counts.size, other: n - Math.max(...counts.values()) };
    });
    if (s.width > 0 && s.colours >= 2 && s.other > 200) return s;
    if (Date.now() > deadline) throw new Error(`the VNC canvas in the page stayed blank: ${JSON.stringify(s)}`);
    await frame.waitForTimeout(500);
  }
}

async function serialShows(frame, want) {
  await frame.waitForSelector('corral-serial[data-state="connected"]');
  const deadline = Date.now() + 180000;
  for (;;) {
    const text = await frame.evaluate(() => {
      const b = document.querySelector('corral-serial')?.term?.buffer?.active;
      if (!b) return '';
      const out = [];
      for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? '');
      return out.join('\n');
    });
    if (text.includes(want)) return;
    if (Date.now() > deadline) throw new Error(`the serial console in the page never showed ${want}:\n${text}`);
    await frame.waitForTimeout(500);
  }
}

const frameOf = async (page) => {
  const el = await page.waitForSelector(`${tid('desktop-console')} ${tid('desktop-frame')}`);
  return el.contentFrame();
};

let code = 0;
let alice, bob, boss;
try {
  alice = await signIn('alice@example.com', 'alice-pw');
  if (await alice.locator(tid('all-desktops')).count() !== 0) throw new Error('alice, not an admin, sees everyone\'s desktops');
  await waitFree(alice, '1 of 1', 'alice');
  await shot(alice, '1-alice-desktops');
  await alice.click(tid('pool-claim'));
  const row = alice.locator(`${tid('my-desktops')} ${tid('desktop-row')}`);
  await row.waitFor();
  if (await row.getAttribute('data-desktop') !== desktop) throw new Error(`alice got ${await row.getAttribute('data-desktop')}, want ${desktop}`);
  await alice.locator(`${tid('my-desktops')} ${tid('desktop-connect')}`).waitFor();
  step(`alice got ${desktop} (${(await row.locator(tid('desktop-phase')).innerText()).trim()})`);

  // bob, signed in while alice holds it: the pool is full, and the
  // desktop's console, its socket and its connect answer are refused.
  bob = await signIn('bob@example.com', 'bob-pw');
  await waitFree(bob, '0 of 1', 'bob');
  if (await bob.locator(tid('pool-claim')).isEnabled()) throw new Error('bob is offered a desktop of a full pool');
  for (const path of [`/console/${ref}?kind=vnc`, `/console/${ref}?kind=serial`, `/ws/vnc/${ref}`, `/ws/serial/${ref}`,
    `/api/vdi/desktops/${desktop}/connect`]) {
    const r = await bob.request.get(base + path, { maxRedirects: 0 });
    if (r.status() !== 403) throw new Error(`bob's GET ${path} of alice's desktop = ${r.status()}, want 403`);
  }
  const rt = await bob.request.post(`${base}/rdp-token/${ref}`, { headers: { Accept: 'application/json', Origin: base } });
  if (rt.status() !== 403) throw new Error(`bob's RDP token for alice's desktop = ${rt.status()}, want 403`);
  await shot(bob, '2-bob-pool-full');
  step('bob sees the pool full and gets 403 for the console, its sockets, an RDP token and connect of alice\'s desktop');

  // alice connects: the console opens in the page.
  await alice.click(`${tid('my-desktops')} ${tid('desktop-connect')}`);
  await alice.waitForSelector(`${tid('desktop-console')} ${tid('connect-protocol')}`);
  const proto = (await alice.locator(tid('connect-protocol')).innerText()).trim();
  const skipped = (await alice.locator(tid('connect-skipped')).innerText().catch(() => '')).trim();
  if (proto !== 'VNC') throw new Error(`the connect target is ${proto}, want VNC (the guest serves no RDP); skipped: ${skipped}`);
  if (!/rdp: /.test(skipped)) throw new Error(`connect does not say why RDP was skipped: "${skipped}"`);
  const t0 = Date.now();
  const api = await alice.request.get(`${base}/api/vdi/desktops/${desktop}/connect`);
  const answer = await api.json();
  step(`GET .../connect answered in ${Date.now() - t0} ms (the RDP probe of a guest without RDP waits for its timeout)`);
  if (api.status() !== 200 || answer.target?.protocol !== 'vnc' || answer.fallbacks?.[0]?.protocol !== 'serial') {
    throw new Error(`alice's connect answer = ${api.status()} ${JSON.stringify(answer)}`);
  }
  let frame = await frameOf(alice);
  const s = await vncShows(frame);
  if (await frame.locator('header.top').count() !== 0) throw new Error('the console in the page shows the dashboard\'s header');
  await shot(alice, '3-alice-connected-vnc');
  step(`alice connected in the page: VNC (${skipped.replace(/\n/g, '; ')}), canvas ${s.width}x${s.height}, ${s.colours} colours, ${s.other} non-background pixels`);
  await alice.locator(`${tid('my-desktops')} ${tid('desktop-session')}`, { hasText: 'connected' }).waitFor();
  step('the page updated by itself: alice\'s desktop is connected');

  // The serial fallback, in the same region.
  await alice.click(tid('connect-option-serial'));
  await alice.waitForSelector(`${tid('connect-protocol')}:text("SERIAL")`);
  frame = await frameOf(alice);
  await serialShows(frame, marker);
  await shot(alice, '4-alice-connected-serial');
  step(`the serial fallback shows the guest's ${marker}`);

  // alice releases; bob's page updates by itself; bob gets the same one.
  await alice.click(`${tid('my-desktops')} ${tid('desktop-release')}`);
  await alice.waitForSelector(tid('no-desktops'));
  await alice.waitForSelector(tid('desktop-frame'), { state: 'detached' }); // its console closed with it
  await waitFree(alice, '1 of 1', 'alice after the release');
  await shot(alice, '5-alice-released');
  step('alice released the desktop');
  await waitFree(bob, '1 of 1', 'bob (live update)');
  step('bob\'s page showed the free desktop without a reload');
  await bob.click(tid('pool-claim'));
  const brow = bob.locator(`${tid('my-desktops')} ${tid('desktop-row')}`);
  await brow.waitFor();
  if (await brow.getAttribute('data-desktop') !== desktop) throw new Error(`bob got ${await brow.getAttribute('data-desktop')}, want ${desktop}`);
  await shot(bob, '6-bob-got-it');
  step(`bob got the same desktop, ${desktop}`);
  const ar = await alice.request.get(`${base}/api/vdi/desktops/${desktop}/connect`);
  if (ar.status() !== 403) throw new Error(`alice's connect to bob's desktop = ${ar.status()}, want 403`);

  // The admin: everyone's desktops, the pools page, a force release.
  boss = await signIn('boss@example.com', 'boss-pw');
  const owner = boss.locator(`${tid('all-desktops')} ${tid('desktop-owner')}`);
  if ((await owner.innerText()).trim() !== 'bob@example.com') throw new Error(`the admin sees holder "${await owner.innerText()}"`);
  await boss.click(tid('desktop-pools-admin'));
  await boss.waitForSelector(tid('member-row'));
  const holder = (await boss.locator(tid('member-holder')).innerText()).trim();
  if (holder !== 'bob@example.com') throw new Error(`the pools page shows holder "${holder}"`);
  await shot(boss, '7-admin-pools');
  await boss.goto(`${base}/desktops`);
  await boss.click(`${tid('all-desktops')} ${tid('desktop-release')}`);
  await waitFree(boss, '1 of 1', 'the admin after the force release');
  await bob.waitForSelector(tid('no-desktops'));
  await shot(bob, '8-bob-after-force-release');
  step('the admin force-released bob\'s desktop; bob\'s page shows it gone');

  if (problems.length) throw new Error('browser reported problems:\n' + problems.join('\n'));
  console.log('ok');
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  for (const [name, p] of [['alice', alice], ['bob', bob], ['boss', boss]]) {
    if (p) await p.screenshot({ path: join(outdir, `failure-${name}.png`), fullPage: true }).catch(() => {});
  }
  code = 1;
} finally {
  await browser.close();
}
process.exit(code);
