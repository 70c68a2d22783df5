// The dashboard in a real browser (run by TestDashboardInBrowser in
// internal/dashboard/browser_test.go). The Go test serves the dashboard as
// the operator does, on a real API server, and offers hooks at $HOOK_URL that
// change the cluster (or restart the dashboard) when the page has to notice.
//
// It signs in with a token, reads the pipeline graph, sees a change arrive
// live without a reload, promotes, reads the promotion's review (a
// resource's value diff, the commits, the code's diff, the fired policy
// rules, at desktop and phone width), approves, survives an operator restart,
// filters Stacks, finds the secret output masked and exports the audit
// trail.

import { launch, step, close } from './lib.mjs';

const base = process.env.BASE_URL;
const token = process.env.TOKEN;
const hook = process.env.HOOK_URL;
const ns = process.env.NAMESPACE;
for (const [k, v] of Object.entries({ BASE_URL: base, TOKEN: token, HOOK_URL: hook, NAMESPACE: ns })) {
  if (!v) throw new Error(`${k} is not set`);
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

// callHook asks the Go test to change something, and waits until it has.
async function callHook(name, params = {}) {
  const u = new URL(`${hook}/${name}`);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  const res = await fetch(u, { method: 'POST' });
  const text = await res.text();
  if (!res.ok) throw new Error(`hook ${name}: ${res.status} ${text}`);
  return text;
}

// markDocument tags the current document; sameDocument tells whether it is
// still the one shown, i.e. nothing reloaded or navigated.
const markDocument = (page) => page.evaluate(() => { window.__stackyardMark = true; });
const sameDocument = (page) => page.evaluate(() => window.__stackyardMark === true);

const pipelineURL = `${base}/pipelines/${ns}/web`;
const { page } = await launch();
try {
  await step('an anonymous visitor is sent to sign in, then back', async () => {
    await page.goto(pipelineURL);
    await page.waitForURL(/\/login\?next=/);
    await page.fill('#token', 'not-a-token');
    await page.click('#login-form button[type=submit]');
    await page.locator('#login-error', { hasText: 'does not accept' }).waitFor();
    await page.fill('#token', token);
    await page.click('#login-form button[type=submit]');
    await page.waitForURL(pipelineURL);
    const user = await page.locator('#user').textContent();
    check(user === `system:serviceaccount:${ns}:alice`, `signed in as ${user}`);
  });

  await step('the pipeline is a graph with fan-out and fan-in', async () => {
    const svg = page.locator(`#graph-${ns}-web`);
    await svg.waitFor();
    check(await svg.locator('g.node.stage').count() === 3, 'want 3 stage nodes');
    check(await svg.locator('path.edge').count() === 4, 'want 4 edges');
    check(await svg.locator('path.edge.all[data-to="qa"]').count() === 2, 'want 2 All edges into qa');
    const dev = svg.locator('g.node[data-stage="dev"]');
    check(await dev.getAttribute('data-health') === 'Healthy', 'dev is not Healthy');
    check((await dev.textContent()).includes('bbbbbbb'), 'dev does not show its release');
    const box = await svg.boundingBox();
    check(box && box.width > 300 && box.height > 60, `graph not laid out: ${JSON.stringify(box)}`);
  });

  await step('live updates connect', () => page.locator('#live.on').waitFor());

  await step('a change in the cluster shows without a reload', async () => {
    await markDocument(page);
    const t0 = Date.now();
    await callHook('degrade');
    await page.locator(`#graph-${ns}-web g.node[data-stage="dev2"][data-health="Degraded"]`).waitFor();
    console.log(`change visible ${Date.now() - t0} ms after the hook returned`);
    await page.locator('#stage-dev2 .msg', { hasText: 'boom' }).waitFor();
    check(await sameDocument(page), 'the page reloaded');
  });

  await step('promote a release into qa', async () => {
    await page.locator('#stage-qa details.actions summary').click();
    const form = page.locator('#stage-qa form.promote');
    await form.locator('input[name=release]').fill('web-bbbbbbb');
    await form.locator('input[name=reason]').fill('from the browser');
    await form.locator('button[type=submit]').click();
    await page.waitForURL(/\/promotions\/[^/]+\/qa-/);
    await page.locator('#notice', { hasText: 'requested promote' }).waitFor();
  });
  const promotion = new URL(page.url()).pathname.split('/').pop();

  await step('the decided plan shows live and asks for approval', async () => {
    await markDocument(page);
    await callHook('plan', { promotion });
    await page.locator('#approve').waitFor();
    await page.locator('#previews', { hasText: 'File::page' }).waitFor();
    check(await sameDocument(page), 'the page reloaded');
    if (process.env.SHOT_DIR) {
      await page.screenshot({ path: `${process.env.SHOT_DIR}/promotion.png`, fullPage: true });
    }
  });

  await step('an approver reads the review: value diffs, commits, code, policies', async () => {
    const row = page.locator('#previews tr.resource[data-urn$="Random::id"]');
    check((await row.locator('td.op').textContent()).trim() === '+- replace', 'the step has no sign and word');
    const props = row.locator('ul.props');
    check(!(await props.isVisible()), 'the diff is open before it is asked for');
    await row.locator('details.values summary').click();
    await props.waitFor();
    const text = await props.textContent();
    check(text.includes('keepers.version: "v1" → "v2"') && text.includes('forces replacement'), `diff: ${text}`);
    const secret = await page.locator('#previews tr.resource[data-urn$="File::secretPage"] details.values');
    await secret.locator('summary').click();
    check((await secret.textContent()).includes('"[secret]" → "[secret]"'), 'the changed secret is not shown masked');
    const commits = await page.locator('#previews ol.commits li.commit').allTextContents();
    check(commits.length === 2 && commits[0].includes('eeeeeee') && commits[0].includes('faster <pages>'), `commits: ${JSON.stringify(commits)}`);
    await page.locator('#previews p.more', { hasText: '… and 3 more' }).waitFor();
    await page.locator('#previews details.patch summary').click();
    await page.locator('#previews pre.patch span.add', { hasText: '+content: v2' }).waitFor();
    await page.locator('#policies li.policy[data-policy="no-replace"]', { hasText: 'needs 2 approvals from group dba' }).waitFor();
    // A live change swaps the page's content in: what the reader opened
    // stays open.
    const before = await page.evaluate(() => document.body.dataset.refreshed || '');
    await callHook('touch', { promotion });
    await page.waitForFunction((old) => (document.body.dataset.refreshed || '') !== old, before);
    await page.locator('#promotion-message', { hasText: 'as of' }).waitFor();
    check(await props.isVisible(), 'a live refresh closed the diff');
    check(await page.locator('#previews pre.patch').isVisible(), 'a live refresh closed the code diff');
    if (process.env.SHOT_DIR) {
      await page.screenshot({ path: `${process.env.SHOT_DIR}/review.png`, fullPage: true });
    }
    await page.setViewportSize({ width: 375, height: 812 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `the promotion page is ${overflow}px wider than the phone's screen`);
    if (process.env.SHOT_DIR) {
      await page.locator('#previews').scrollIntoViewIfNeeded();
      await page.screenshot({ path: `${process.env.SHOT_DIR}/review-phone.png`, fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await step('approve it', async () => {
    await page.fill('#comment', 'looks good');
    await page.click('#approve');
    await page.locator('#notice', { hasText: `approved promotion ${promotion}` }).waitFor();
  });

  await step('the page reconnects after an operator restart and catches up', async () => {
    await page.goto(pipelineURL);
    await page.locator('#live.on').waitFor();
    await markDocument(page);
    const boot = await page.evaluate(() => document.body.dataset.boot);
    await callHook('restart');
    await page.waitForFunction((old) => document.body.dataset.boot !== old, boot);
    await page.locator('#live.on').waitFor();
    await callHook('heal');
    await page.locator(`#graph-${ns}-web g.node[data-stage="dev2"][data-health="Healthy"]`).waitFor();
    check(await sameDocument(page), 'the page reloaded');
    if (process.env.SHOT_DIR) {
      await page.screenshot({ path: `${process.env.SHOT_DIR}/pipeline.png`, fullPage: true });
    }
  });

  await step('Stacks filter by namespace and state', async () => {
    await page.goto(`${base}/stacks`);
    await page.selectOption('#stack-filters select[name=namespace]', ns);
    await page.selectOption('#stack-filters select[name=state]', 'Progressing');
    await page.click('#stack-filters button[type=submit]');
    await page.waitForURL(/state=Progressing/);
    const rows = await page.locator('#stacks tbody tr[data-stack]').evaluateAll((trs) => trs.map((tr) => tr.dataset.stack));
    check(JSON.stringify(rows) === JSON.stringify([`${ns}/site-qa`]), `rows ${JSON.stringify(rows)}`);
  });

  await step('a Stack shows its outputs, the secret one masked', async () => {
    await page.goto(`${base}/stacks/${ns}/site-dev`);
    const outputs = await page.locator('#outputs').textContent();
    check(outputs.includes('"https://site.example"'), `outputs: ${outputs}`);
    check(outputs.includes('"[secret]"'), `outputs: ${outputs}`);
    if (process.env.SHOT_DIR) {
      await page.screenshot({ path: `${process.env.SHOT_DIR}/stack.png`, fullPage: true });
    }
  });

  await step('the audit trail lists the approval and exports JSON', async () => {
    await page.goto(`${base}/audit?namespace=${ns}`);
    await page.locator('#audit tr.entry[data-event="ApprovalGiven"]').waitFor();
    const href = await page.locator('#export').getAttribute('href');
    const res = await page.request.get(new URL(href, base).toString());
    check(res.ok(), `export: ${res.status()}`);
    const list = await res.json();
    check(list.apiVersion === 'cli.stackyard.dev/v1' && list.kind === 'History', `export shape: ${JSON.stringify(list).slice(0, 200)}`);
    check(list.items.some((e) => e.event === 'ApprovalGiven' && e.by === `system:serviceaccount:${ns}:alice`), 'no approval by alice in the export');
    check(list.items.every((e) => e.namespace === ns), 'the export ignored the page\'s namespace filter');
  });

  await step('readable at phone width, without a page-wide scroll', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const path of [`/pipelines/${ns}/web`, '/stacks', `/audit?namespace=${ns}`]) {
      await page.goto(`${base}${path}`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(overflow <= 1, `${path} is ${overflow}px wider than the phone's screen`);
    }
    if (process.env.SHOT_DIR) {
      await page.goto(`${base}/pipelines/${ns}/web`);
      await page.screenshot({ path: `${process.env.SHOT_DIR}/phone.png`, fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await step('usable with the keyboard', async () => {
    await page.goto(`${base}/pipelines/${ns}/web`);
    await page.keyboard.press('Tab');
    check(await page.evaluate(() => document.activeElement.textContent) === 'Skip to content', 'Tab does not reach the skip link first');
    // Tab through to the qa node of the graph and follow it with Enter.
    let found = false;
    for (let i = 0; i < 40 && !found; i++) {
      await page.keyboard.press('Tab');
      found = await page.evaluate(() => document.activeElement.getAttribute('href') === '#stage-qa');
    }
    check(found, 'the graph\'s qa node cannot be reached with Tab');
    await page.keyboard.press('Enter');
    await page.waitForURL(/#stage-qa$/);
  });

  await step('sign out', async () => {
    await page.click('header form[action="/logout"] button');
    await page.waitForURL(/\/login/);
    await page.goto(pipelineURL);
    await page.waitForURL(/\/login\?next=/);
  });
} finally {
  await close();
}
