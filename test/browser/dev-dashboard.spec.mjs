// The dashboard of `stackyard dev`, in a real browser (run by
// TestDevDashboard in test/e2e/dashboard_test.go). The sample pipeline runs
// for real: a commit becomes a release, auto-promotion takes it to
// sample-dev, and sample-prod waits for a person's approval.
//
// Screenshots of each state go to $SCREENSHOT_DIR (docs/dashboard.md shows
// them).

import { launch, step, close, TIMEOUT } from './lib.mjs';

const base = process.env.BASE_URL;
const token = process.env.TOKEN;
const viewerToken = process.env.VIEWER_TOKEN;
const hook = process.env.HOOK_URL;
const shots = process.env.SCREENSHOT_DIR;
for (const [k, v] of Object.entries({ BASE_URL: base, TOKEN: token, VIEWER_TOKEN: viewerToken, HOOK_URL: hook, SCREENSHOT_DIR: shots })) {
  if (!v) throw new Error(`${k} is not set`);
}

// A real update takes a while: promotions wait this long.
const SLOW = Math.max(TIMEOUT, 240000);

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function callHook(name) {
  const res = await fetch(`${hook}/${name}`, { method: 'POST' });
  const text = await res.text();
  if (!res.ok) throw new Error(`hook ${name}: ${res.status} ${text}`);
  return text;
}

async function shot(p, name) {
  await p.setViewportSize({ width: 1280, height: 800 });
  await p.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

async function signIn(p, tok) {
  await p.goto(`${base}/login?next=${encodeURIComponent('/pipelines/default/sample')}`);
  await p.fill('#token', tok);
  await p.click('#login-form button[type=submit]');
  await p.waitForURL(`${base}/pipelines/default/sample`);
}

const pipelineURL = `${base}/pipelines/default/sample`;
const { browser, page } = await launch();
try {
  await step('sign in with the token stackyard dev printed', () => signIn(page, token));

  await step('the sample pipeline renders, prod waiting for approval', async () => {
    const svg = page.locator('#graph-default-sample');
    await svg.waitFor();
    await svg.locator('g.node[data-stage="sample-dev"][data-health="Healthy"]').waitFor({ timeout: SLOW });
    await svg.locator('g.node[data-stage="sample-prod"]', { hasText: 'needs approval' }).waitFor({ timeout: SLOW });
    await page.locator('#waiting a').first().waitFor();
    await page.locator('#live.on').waitFor();
    await shot(page, 'pipeline');
  });

  let sha = '';
  await step('a new commit appears live as a release', async () => {
    await page.evaluate(() => { window.__stackyardMark = true; });
    sha = (await callHook('commit')).trim();
    await page.locator(`#timeline code[title="${sha}"]`).waitFor({ timeout: SLOW });
    check(await page.evaluate(() => window.__stackyardMark === true), 'the page reloaded');
  });

  // The new release goes to sample-dev by itself and then waits for an
  // approval into sample-prod, which supersedes the first release's
  // request there: a superseded promotion can no longer be decided, so the
  // approval below goes to the new release's promotion, once it waits.
  let promotionPath = '';
  await step('the new release waits for approval into prod', async () => {
    const release = await page.locator('#timeline tr', { has: page.locator(`code[title="${sha}"]`) }).getAttribute('data-release');
    const waiting = page.locator('#waiting li', { hasText: `release ${release} into sample-prod` }).locator('a');
    await waiting.waitFor({ timeout: SLOW });
    promotionPath = await waiting.getAttribute('href');
  });

  await step('a user without the verb "approve" is refused', async () => {
    const context = await browser.newContext();
    const viewer = await context.newPage();
    try {
      await signIn(viewer, viewerToken);
      await viewer.goto(`${base}${promotionPath}`);
      await viewer.fill('#comment', 'I would like to');
      await viewer.click('#approve');
      await viewer.locator('#error', { hasText: 'needs the verb "approve"' }).waitFor();
      await shot(viewer, 'refused');
    } finally {
      await context.close();
    }
  });

  await step('an approval clicked in the page moves the release to prod', async () => {
    await page.goto(`${base}${promotionPath}`);
    await page.locator('#previews .preview').first().waitFor();
    await shot(page, 'promotion');
    const release = await page.locator('#promotion-release').textContent();
    await page.fill('#comment', 'ship it');
    await page.click('#approve');
    await page.locator('#notice', { hasText: 'approved promotion' }).waitFor();
    await page.goto(pipelineURL);
    await page.locator(`#timeline tr[data-release="${release}"] td.cell.current[data-stage="sample-prod"]`).waitFor({ timeout: SLOW });
    await page.locator('#graph-default-sample g.node[data-stage="sample-prod"][data-health="Healthy"]').waitFor({ timeout: SLOW });
    await shot(page, 'approved');
  });
} finally {
  await close();
}
