// dashboard.mjs drives the Corral dashboard in headless Chromium:
//   node dashboard.mjs <baseURL> <outdir>
// It finds a running VM, stops it through the VM page, checks the page,
// another tab's inventory table (live, without a reload) and the activity
// panel, starts it again, scales it through the form, and checks a
// phone-width viewport. Screenshots go to <outdir>. It exits non-zero on
// the first failed check.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outdir] = process.argv.slice(2);
if (!base || !outdir) {
  console.error('usage: node dashboard.mjs <baseURL> <outdir>');
  process.exit(2);
}
await mkdir(outdir, { recursive: true });
const tid = (id) => `[data-testid="${id}"]`;
const step = (msg) => console.log(`- ${msg}`);

const profile = await mkdtemp(join(tmpdir(), 'corral-e2e-'));
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
function watch(page, name) {
  page.on('pageerror', (e) => problems.push(`${name}: page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error' && !m.text().includes('status of 409')) problems.push(`${name}: console: ${m.text()}`); });
}
// marks a page so that a reload (which would lose the mark) is detected
const mark = (page) => page.evaluate(() => { window.__corralMark = 'kept'; });
const marked = (page) => page.evaluate(() => window.__corralMark === 'kept');

let code = 0;
try {
  // The datacenter page, desktop width.
  const dc = ctx.pages()[0] ?? await ctx.newPage();
  watch(dc, 'datacenter');
  await dc.goto(`${base}/?state=running&backend=sim`); // sim VMs scale
  await dc.waitForSelector(`${tid('instance-row')}[data-state="running"]`);
  await dc.waitForSelector(`${tid('live')}.on`); // the SSE stream is connected
  await dc.screenshot({ path: join(outdir, 'datacenter-desktop.png'), fullPage: true });
  const row = dc.locator(`${tid('instance-row')}[data-state="running"]`).first();
  const ref = await row.getAttribute('data-ref');
  const name = await row.locator(tid('instance-link')).innerText();
  const href = await row.locator(tid('instance-link')).getAttribute('href');
  step(`running VM: ${ref}`);

  // Narrow the table to that VM through the search box (htmx, no reload).
  await mark(dc);
  await dc.fill(`${tid('search')}`, name);
  await dc.selectOption(tid('filter-state'), '');
  await dc.waitForFunction((n) => {
    const rows = document.querySelectorAll('[data-testid="instance-row"]');
    return rows.length === 1 && rows[0].querySelector('[data-testid="instance-link"]').textContent === n;
  }, name);
  if (!(await marked(dc))) throw new Error('searching reloaded the page');
  if (!dc.url().includes('q=')) throw new Error(`the search did not push its URL: ${dc.url()}`);
  step('search narrowed the table without a reload');

  // The VM page in a second tab.
  const vm = await ctx.newPage();
  watch(vm, 'vm');
  await vm.goto(base + href);
  await vm.waitForSelector(`${tid('vm-state')}:text-is("running")`);
  await vm.waitForSelector(`${tid('live')}.on`);
  await vm.screenshot({ path: join(outdir, 'vm-desktop.png'), fullPage: true });
  await mark(vm);

  // Stop it through the UI.
  await vm.click(tid('action-stop'));
  await vm.waitForSelector(`${tid('vm-state')}:text-is("stopped")`);
  await vm.waitForSelector(tid('action-start'));
  step('the VM page shows stopped');
  await dc.waitForSelector(`tr[data-ref="${ref}"][data-state="stopped"]`);
  step('the other tab\'s table shows stopped, live');
  await vm.waitForSelector(`${tid('activity')} ${tid('task')}[data-action="stop"][data-target="${ref}"][data-status="done"]`);
  await dc.waitForSelector(`${tid('activity')} ${tid('task')}[data-action="stop"][data-target="${ref}"]`);
  step('the stop task is in both activity panels');
  await vm.screenshot({ path: join(outdir, 'vm-stopped.png'), fullPage: true });

  // Start it again.
  await vm.click(tid('action-start'));
  await vm.waitForSelector(`${tid('vm-state')}:text-is("running")`);
  await dc.waitForSelector(`tr[data-ref="${ref}"][data-state="running"]`);
  await vm.waitForSelector(`${tid('activity')} ${tid('task')}[data-action="start"][data-target="${ref}"]`);
  step('started again; page, table and activity agree');
  if (!(await marked(vm)) || !(await marked(dc))) throw new Error('a page reloaded during the power actions');

  // Scale it through the VM page's form: the page and the other tab's row
  // show the new CPU count without a reload.
  const cpus = String(Number(await vm.locator(tid('fact-cpu')).innerText()) + 1);
  // A fleet change while the operator types does not wipe the form: the
  // summary is not fetched again while one of its fields has the focus
  // (the demo's own changes keep coming too). Once the field lost the
  // focus, a fleet event fetches it again.
  const summaryGets = [];
  const isSummary = (req) => req.method() === 'GET' && req.headers()['hx-target'] === 'section#summary';
  const onRequest = (req) => { if (isSummary(req)) summaryGets.push(req.url()); };
  vm.on('request', onRequest);
  await vm.fill(tid('scale-cpu'), cpus);
  await vm.evaluate(() => { document.dispatchEvent(new Event('fleet')); return new Promise((r) => setTimeout(r, 500)); });
  if (summaryGets.length !== 0 || (await vm.inputValue(tid('scale-cpu'))) !== cpus) {
    throw new Error(`a fleet change fetched the summary ${summaryGets.length} times while its form was being filled: ${summaryGets.join(" ")}`);
  }
  await vm.evaluate(() => document.activeElement.blur());
  const refetch = vm.waitForResponse((res) => isSummary(res.request()));
  await vm.evaluate(() => document.dispatchEvent(new Event('fleet')));
  await refetch;
  vm.off('request', onRequest);
  step('a fleet change does not reset a form being filled');
  await vm.fill(tid('scale-cpu'), cpus);
  await vm.click(tid('scale-submit'));
  await vm.waitForSelector(`${tid('fact-cpu')}:text-is("${cpus}")`);
  await dc.waitForFunction(([r, c]) => {
    const tr = document.querySelector(`tr[data-ref="${r}"]`);
    return tr !== null && tr.children[4].textContent.trim() === c;
  }, [ref, cpus]);
  await vm.waitForSelector(`${tid('activity')} ${tid('task')}[data-action="scale"][data-target="${ref}"][data-status="done"]`);
  if (!(await marked(vm)) || !(await marked(dc))) throw new Error('a page reloaded during the scale');
  step(`scaled to ${cpus} CPU through the form; page, table and activity agree`);

  // A failed action lands in #flash, not in the summary.
  await vm.evaluate(() => htmx.ajax('POST', location.pathname + '/start', { target: '#summary', swap: 'outerHTML' }));
  await vm.waitForSelector(`${tid('flash')} ${tid('error')}[data-status="409"]`);
  if (await vm.locator(tid('summary')).count() !== 1) throw new Error('the error replaced the summary');
  step('a refused action shows its message in #flash');

  // The delete confirmation step (cancelled).
  await vm.click(tid('action-delete'));
  await vm.waitForSelector(tid('confirm-delete'));
  await vm.screenshot({ path: join(outdir, 'vm-delete-confirm.png'), fullPage: true });
  await vm.click(tid('cancel-delete'));
  await vm.waitForSelector(tid('vm-state'));
  step('delete asks for confirmation');

  // Phone width.
  const phone = await ctx.newPage();
  watch(phone, 'phone');
  await phone.setViewportSize({ width: 375, height: 740 });
  await phone.goto(base + '/');
  const table = phone.locator(tid('inventory-table'));
  await table.waitFor({ state: 'visible' });
  const fit = await phone.evaluate(() => ({
    page: document.documentElement.scrollWidth,
    wrap: document.querySelector('.table-wrap').getBoundingClientRect().width,
    tree: document.querySelector('[data-testid="contexts"]').getBoundingClientRect().bottom,
    table: document.querySelector('[data-testid="inventory-table"]').getBoundingClientRect().top,
  }));
  if (fit.page > 375 + 1) throw new Error(`the page is ${fit.page}px wide at 375px`);
  if (fit.tree > fit.table) throw new Error('the contexts tree is not above the table at phone width');
  await phone.screenshot({ path: join(outdir, 'datacenter-phone.png'), fullPage: true });
  await phone.goto(base + href);
  await phone.waitForSelector(tid('vm-state'));
  await phone.screenshot({ path: join(outdir, 'vm-phone.png'), fullPage: true });
  step(`phone width: table visible, page ${fit.page}px wide`);

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
