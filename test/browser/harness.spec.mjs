// The harness's own check (run by TestHarness in harness_test.go): open the
// page the Go test serves at $BASE_URL, wait for its EventSource to connect,
// click the button (a fetch() POST), then wait for the response text and for
// the server-sent event that the server sends only after it got the POST.

import { launch, step, close } from './lib.mjs';

const base = process.env.BASE_URL;
if (!base) throw new Error('BASE_URL is not set');

const { page } = await launch();
try {
  await step('open the page', async () => {
    await page.goto(base);
    const title = await page.title();
    if (title !== 'harness') throw new Error(`title is ${JSON.stringify(title)}`);
  });

  await step('event stream connects', async () => {
    await page.locator('body[data-sse="open"]').waitFor({ state: 'attached' });
    const events = await page.locator('#events').textContent();
    if (events !== '') throw new Error(`an event came before the click: ${JSON.stringify(events)}`);
  });

  await step('click the button', () => page.getByRole('button', { name: 'Increment' }).click());

  await step('response text shows', () =>
    page.locator('#result', { hasText: 'count=1' }).waitFor());

  await step('server-sent event arrives after the POST', () =>
    page.locator('#events', { hasText: 'server saw POST #1' }).waitFor());
} finally {
  await close();
}
