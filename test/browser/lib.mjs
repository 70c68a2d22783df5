// Helpers for the browser specs (*.spec.mjs) that Go tests run through
// browser.Run: launch Debian's Chromium with playwright-core, run named steps
// and close it again.
//
//   import { launch, step, close } from './lib.mjs';
//   const { page } = await launch();
//   try {
//     await step('open the page', () => page.goto(process.env.BASE_URL));
//   } finally {
//     await close();
//   }

import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium } from 'playwright-core';

// Flags for Chromium in this sandbox. Without the background-networking ones
// Chromium keeps dialling Google services, which the closed network refuses.
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

// How long one Playwright action or expectation may wait, in milliseconds.
export const TIMEOUT = Number(process.env.BROWSER_TIMEOUT_MS || 15000);

let browser;
let page;
let shots = 0;

// launch starts Chromium (the CHROMIUM environment variable, else
// /usr/bin/chromium) and opens one page. Playwright gives every launch a new,
// empty temporary profile (--user-data-dir) and deletes it on close().
// The page's console messages and uncaught errors are logged.
export async function launch() {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
    timeout: 60000,
  });
  page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('console', (msg) => console.log(`console.${msg.type()}: ${msg.text()}`));
  page.on('pageerror', (err) => console.log(`pageerror: ${err.message}`));
  return { browser, page };
}

// step runs fn (given the page) and logs "ok <name>". When fn throws, it saves
// a screenshot into $SCREENSHOT_DIR (when set) and throws an error that starts
// with the step's name.
export async function step(name, fn) {
  try {
    const result = await fn(page);
    console.log(`ok ${name}`);
    return result;
  } catch (err) {
    let shot = '';
    if (page && process.env.SCREENSHOT_DIR) {
      const file = path.join(process.env.SCREENSHOT_DIR,
        `${String(++shots).padStart(2, '0')}-${name.replace(/[^A-Za-z0-9._-]+/g, '_')}.png`);
      try {
        await mkdir(process.env.SCREENSHOT_DIR, { recursive: true });
        await page.screenshot({ path: file, fullPage: true, timeout: 5000 });
        shot = ` (screenshot: ${file})`;
      } catch (shotErr) {
        shot = ` (no screenshot: ${shotErr.message})`;
      }
    }
    throw new Error(`step "${name}" failed${shot}: ${err.message}`, { cause: err });
  }
}

// close closes the browser; it is safe to call more than once.
export async function close() {
  const b = browser;
  browser = undefined;
  page = undefined;
  if (b) await b.close();
}
