// Runs `page.js` (the official TypeScript SDK client, bundled here with esbuild) in a web page in
// headless Chromium (Debian's, through playwright-core) against a Switchboard cluster, and a
// second page on an origin the cluster does not allow.
//
//   node drive.mjs CONFIG_JSON
//
// CONFIG_JSON: {"nodeA", "nodeB" (MCP endpoint URLs), "token", "wideToken" (bearer tokens),
// "allowedOrigin", "foreignOrigin" (http://<name>:<port>; each name is mapped to 127.0.0.1 in
// Chromium, and this script serves the page on each port)}. Prints one JSON summary line:
// what each step of the page saw, what the foreign page saw, the browser's console errors.
// Exit code 0 when both pages ran to their end.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const config = JSON.parse(process.argv[2]);
const summary = { ok: false, console: [] };
const servers = [];
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-browser-'));
let context;

function serve(origin, script) {
  const port = Number(new URL(origin).port);
  const page = '<!doctype html><meta charset="utf-8"><title>switchboard page</title>'
    + '<script src="/page.js"></script>';
  const server = http.createServer((req, res) => {
    if (req.url === '/page.js') {
      res.writeHead(200, { 'Content-Type': 'text/javascript' });
      res.end(script);
    } else {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(page);
    }
  });
  servers.push(server);
  return new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
}

try {
  const built = await esbuild.build({
    entryPoints: [path.join(here, 'page.js')],
    bundle: true, write: false, format: 'iife', platform: 'browser', logLevel: 'silent',
  });
  const script = built.outputFiles[0].text;
  await serve(config.allowedOrigin, script);
  await serve(config.foreignOrigin, script);
  const names = [config.allowedOrigin, config.foreignOrigin].map((o) => new URL(o).hostname);
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--host-resolver-rules=${names.map((n) => `MAP ${n} 127.0.0.1`).join(', ')}`],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (m) => { if (m.type() === 'error') summary.console.push(m.text()); });
  page.setDefaultTimeout(20_000);
  await page.goto(config.allowedOrigin + '/');
  summary.page = await page.evaluate((c) => window.scenario(c), config);
  const foreign = await context.newPage();
  foreign.on('console', (m) => { if (m.type() === 'error') summary.console.push(m.text()); });
  await foreign.goto(config.foreignOrigin + '/');
  summary.foreign = await foreign.evaluate((node) => window.blocked(node), config.nodeA);
  summary.ok = true;
} catch (err) {
  summary.error = String(err?.stack ?? err);
} finally {
  await context?.close().catch(() => {});
  for (const s of servers) s.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(summary) + '\n');
process.exit(summary.ok ? 0 : 1);
