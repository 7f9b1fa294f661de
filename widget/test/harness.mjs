// What the widget tests share: query-api processes on the test HBase, a
// shop's pages on another origin, a TCP proxy that can cut a query-api off
// from HBase, headless Chromium, and helpers that reach into the widgets'
// shadow roots. scripts/browser-tests.sh sets the environment.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';

const require = createRequire(`${process.env.WIDGET_TEST_MODULES}/`);
export const puppeteer = require('puppeteer-core');
export const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** The hottest demo product: the one with the most reviews. */
export const HOT_PRODUCT = 'P000000001';

// Ports for the query-api processes come from below the kernel's ephemeral
// range, as the Rust tests' do (tests/src/lib.rs, free_port): a port the
// kernel picked for listen(0) and released could be taken by an outgoing
// connection (HBase opens many) before query-api bound it. Each call moves on
// to the next port, starting from a place set by the process id.
const PORT_SPAN = 8000;
const ephemeralStart = (() => {
  try {
    const start = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return start > 30000 ? start : 32768;
  } catch {
    return 32768;
  }
})();
let nextPortOffset = process.pid % PORT_SPAN;

const listensFreely = (port) => new Promise((resolve) => {
  const server = net.createServer();
  server.once('error', () => resolve(false));
  server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
});

async function freePort() {
  for (let tried = 0; tried < PORT_SPAN; tried += 1) {
    const port = ephemeralStart - PORT_SPAN + nextPortOffset;
    nextPortOffset = (nextPortOffset + 1) % PORT_SPAN;
    if (await listensFreely(port)) return port;
  }
  throw new Error(`no free loopback port below ${ephemeralStart}`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts query-api on the test tables with `args`, reading HBase at
 * `thrift` and `thrift2` (by default the test HBase); resolves once it is ready.
 */
export async function startQueryApi(args = [], { thrift, thrift2 } = {}) {
  const port = await freePort();
  const env = {
    ...process.env,
    RUST_LOG: 'warn',
    REVIEWS_TABLE_PREFIX: process.env.WIDGET_TEST_TABLE_PREFIX,
    ...(thrift ? { REVIEWS_THRIFT_ADDR: thrift } : {}),
    ...(thrift2 ? { REVIEWS_THRIFT2_ADDR: thrift2 } : {}),
  };
  const child = spawn(process.env.WIDGET_TEST_QUERY_API, ['--listen', `127.0.0.1:${port}`, ...args], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 120; attempt += 1) {
    if (child.exitCode !== null) throw new Error(`query-api exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${base}/readyz`)).ok) return { base, stop: () => child.kill('SIGTERM') };
    } catch {
      // Not listening yet.
    }
    await sleep(250);
  }
  child.kill('SIGKILL');
  throw new Error('query-api did not become ready');
}

/** A TCP proxy to `target` (host:port) that `cut()` closes for good. */
export async function cuttableProxy(target) {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const sockets = new Set();
  let cut = false;
  const server = net.createServer((client) => {
    if (cut) return client.destroy();
    const upstream = net.connect(port, host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${server.address().port}`,
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    close: () => server.close(),
  };
}

/**
 * A shop's pages on an origin of their own (`http://localhost:PORT`, while
 * the API is at 127.0.0.1): `/product/{id}?api=…` renders the widget in the
 * browser; `/ssr/{id}?api=…` includes the server-rendered first view the
 * way a shop's server would; `/blank` is an empty page. `script=…` loads
 * the script from another base than `api`.
 */
export async function startShop() {
  const server = http.createServer(async (request, response) => {
    const url = new URL(request.url, 'http://localhost');
    const api = url.searchParams.get('api');
    const lang = url.searchParams.get('lang') || 'en';
    const [, kind, product] = url.pathname.split('/');
    let body = '';
    if (kind === 'product') {
      body = `<product-reviews product-id="${product}" api="${api}"></product-reviews>`;
    } else if (kind === 'ssr') {
      const fragment = await fetch(`${api}/v1/products/${product}/reviews.html?lang=${lang}&name=Kettle`);
      body = await fragment.text();
    }
    const scriptBase = url.searchParams.get('script') || api;
    const script = scriptBase ? `<script src="${scriptBase}/widget/v1/reviews.js" defer></script>` : '';
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><html lang="${lang}"><head><meta charset="utf-8"><title>Shop</title>${script}</head>`
      + `<body><main><h1>A product</h1>${body}<p>Below the reviews.</p></main></body></html>`);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://localhost:${server.address().port}`, close: () => server.close() };
}

/** Headless Chromium: Debian's build, no download. */
export function launchBrowser() {
  return puppeteer.launch({
    executablePath: process.env.WIDGET_TEST_CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
}

/** Waits until `<product-reviews>` has shown an answer (not loading). */
export async function settled(page) {
  await page.waitForFunction(() => {
    const root = document.querySelector('product-reviews')?.shadowRoot;
    return root && root.querySelector('.widget[aria-busy="false"]');
  }, { timeout: 10_000 });
}

/** Notes the list shown, so that `shownAgain` can wait for the next one. */
export async function noteShown(page) {
  await page.evaluate(() => { window.shownBefore = document.querySelector('product-reviews').shadowRoot.querySelector('.list'); });
}

/** Waits until the widget shows a new list (each answer renders one) and is no longer loading. */
export async function shownAgain(page) {
  await page.waitForFunction(() => {
    const root = document.querySelector('product-reviews').shadowRoot;
    return root.querySelector('.list') !== window.shownBefore && root.querySelector('.widget').getAttribute('aria-busy') === 'false';
  }, { timeout: 10_000 });
}

/** Clicks `selector` inside the widget and waits for the answer it asks for. */
export async function clickAndSettle(page, selector) {
  await noteShown(page);
  await (await page.$(`product-reviews >>> ${selector}`)).click();
  await shownAgain(page);
}

/** Clicks "show more" until the list ends. */
export async function showAll(page) {
  for (let pages = 0; pages < 500 && await page.$('product-reviews >>> [data-more]'); pages += 1) {
    await clickAndSettle(page, '[data-more]');
  }
}

/** The reviews the widget lists: id, stars (null when unrated), author, date, body. */
export function listed(page) {
  return page.evaluate(() => [...document.querySelector('product-reviews').shadowRoot.querySelectorAll('.review')].map((item) => {
    const label = item.querySelector('.stars')?.getAttribute('aria-label');
    return {
      id: item.id,
      stars: label ? Number(label.match(/^(\d)/)[1]) : null,
      author: item.querySelector('.author').textContent,
      date: item.querySelector('time').getAttribute('datetime'),
      body: item.querySelector('.body').textContent,
    };
  }));
}

/** The API requests (`/v1/...`) `page` makes from now on. */
export function countApiRequests(page) {
  const urls = [];
  page.on('request', (request) => {
    if (new URL(request.url()).pathname.startsWith('/v1/')) urls.push(request.url());
  });
  return urls;
}

/** axe-core's WCAG 2.1 A and AA violations on `page`. */
export async function accessibilityViolations(page) {
  await page.addScriptTag({ content: axeSource });
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations.map((violation) => ({ id: violation.id, nodes: violation.nodes.map((node) => node.target) }));
  });
}
