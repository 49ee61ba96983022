// Drives the MCP Inspector's web UI in headless Chromium (Debian's, through playwright-core):
// connect to the server the Inspector was launched with, open Tools, wait for the list, call
// `echo` from the form, and save a screenshot.
//
//   node web_ui.mjs INSPECTOR_URL SCREENSHOT_PATH ECHO_TEXT
//
// INSPECTOR_URL carries the Inspector's API token (`?MCP_INSPECTOR_API_TOKEN=…`). Prints one JSON
// summary line: the connection status, the negotiated revision, the header of the tools list
// (`Tools (N)`), the text of the Tools page before and after the call, the requests refused for
// leaving loopback, and the screenshot's path (on failure: the error and the page's text). Exit
// code 0 when the page got that far.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [url, screenshot, echoText] = process.argv.slice(2);
const STEP_MS = 20_000;
const summary = { ok: false, screenshot };
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-chromium-'));
let context;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(STEP_MS);
  // Loopback only: any other request (the UI asks for web fonts) is refused and noted.
  summary.blockedRequests = [];
  await context.route('**/*', (route) => {
    const host = new URL(route.request().url()).hostname;
    if (host === '127.0.0.1' || host === 'localhost') return route.continue();
    summary.blockedRequests.push(route.request().url());
    return route.abort();
  });

  await page.goto(url);
  // The server card's switch connects (the launch arguments named the server).
  await page.getByRole('switch', { name: /Connect or disconnect/ }).first().click({ force: true });
  const status = page.locator('[data-testid="connection-status"]');
  await page.locator('[data-testid="connection-status"][data-status="connected"]').waitFor();
  summary.status = await status.getAttribute('data-status');
  // The server card shows the revision the session negotiated.
  const revision = page.getByText(/^MCP \d{4}-\d{2}-\d{2}$/).first();
  await revision.waitFor();
  summary.revision = await revision.innerText();

  await page.locator('header').getByText('Tools', { exact: true }).click();
  const heading = page.getByText(/^Tools \(\d+\)$/);
  await heading.waitFor();
  summary.toolsHeading = await heading.innerText();
  await page.locator('main').getByText('echo', { exact: true }).first().waitFor();
  summary.toolsPage = await page.locator('main').innerText();

  // Call `echo` from its form and wait for the result to show.
  await page.locator('main').getByText('echo', { exact: true }).first().click();
  await page.getByRole('textbox', { name: /^text\b/i }).first().fill(echoText);
  await page.getByRole('button', { name: 'Execute Tool' }).click();
  await page.getByText('Results', { exact: true }).waitFor();
  await page.locator('main').getByText(echoText, { exact: true }).last().waitFor();
  summary.afterCall = await page.locator('main').innerText();

  fs.mkdirSync(path.dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot, fullPage: true });
  summary.ok = true;
} catch (err) {
  summary.error = String(err?.stack ?? err);
  if (context) {
    const page = context.pages()[0];
    if (page) {
      summary.pageText = await page.locator('body').innerText().catch(() => null);
      await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});
    }
  }
} finally {
  await context?.close().catch(() => {});
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(summary));
process.exit(summary.ok ? 0 : 1);
