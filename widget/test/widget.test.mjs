// The review widgets in headless Chromium against query-api on a real HBase
// (scripts/browser-tests.sh sets it up): what a shopper sees and can do,
// with a mouse, a keyboard or a screen reader, on a shop's page on another
// origin; what a listing page costs; what the server-rendered first view
// costs in layout shift and says to search engines.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import {
  HOT_PRODUCT, accessibilityViolations, clickAndSettle, countApiRequests, cuttableProxy, launchBrowser, listed,
  noteShown, settled, showAll, shownAgain, startQueryApi, startShop,
} from './harness.mjs';

let api;
let shop;
let browser;
let summary;

before(async () => {
  shop = await startShop();
  api = await startQueryApi(['--demo-pages', '--cors-origins', shop.origin]);
  browser = await launchBrowser();
  summary = await (await fetch(`${api.base}/v1/products/${HOT_PRODUCT}/comments/summary`)).json();
});

after(async () => {
  await browser?.close();
  api?.stop();
  shop?.close();
});

async function productPage(path = `/product/${HOT_PRODUCT}`) {
  const page = await browser.newPage();
  const requests = countApiRequests(page);
  await page.goto(`${shop.origin}${path}?api=${encodeURIComponent(api.base)}`);
  await settled(page);
  return { page, requests };
}

test('each histogram bar lists exactly that star, and show more walks to the count the summary gives', async () => {
  const { page } = await productPage();
  const statusLine = await page.$('product-reviews >>> .status');
  for (const star of [5, 4, 3, 2, 1]) {
    await clickAndSettle(page, `button[data-star="${star}"]`);
    assert.ok(await statusLine.evaluate((line) => line.isConnected), 'the status line stays the element screen readers watch');
    await showAll(page);
    const reviews = await listed(page);
    assert.equal(reviews.length, summary.ratings[star], `${star}-star reviews listed`);
    assert.ok(reviews.every((review) => review.stars === star), `only ${star}-star reviews`);
    assert.equal(new Set(reviews.map((review) => review.id)).size, reviews.length, 'each review once');
    const pressed = await page.$eval(`product-reviews >>> button[data-star="${star}"]`, (bar) => bar.getAttribute('aria-pressed'));
    assert.equal(pressed, 'true');
    const status = await page.$eval('product-reviews >>> .status', (line) => line.textContent);
    assert.match(status, new RegExp(`^${star}-star reviews: ${summary.ratings[star].toLocaleString('en')}, `));
  }
  await page.close();
});

test('the sorts order the list: newest first, highest and lowest rating with unrated last', async () => {
  const { page } = await productPage();
  const inOrder = (values, before) => values.every((value, index) => index === 0 || !before(value, values[index - 1]));
  // The page shows a review's day only: its full time comes from the answers
  // the widget was given, so an order wrong within a day is seen too.
  const times = new Map();
  const answers = [];
  page.on('response', (response) => {
    if (response.request().method() !== 'GET' || new URL(response.url()).pathname !== `/v1/products/${HOT_PRODUCT}/comments`) return;
    answers.push(response.json().then((body) => {
      for (const review of body.comments) times.set(`review-${review.id}`, review.timestamp);
    }));
  });
  await clickAndSettle(page, 'button[data-sort="newest"]');
  for (let pages = 0; pages < 4; pages += 1) await clickAndSettle(page, '[data-more]');
  const newest = await listed(page);
  await Promise.all(answers);
  assert.equal(newest.length, 50);
  const newestTimes = newest.map((review) => times.get(review.id));
  assert.ok(newestTimes.every(Number.isInteger), `each listed review came in an answer: ${newestTimes.join(', ')}`);
  const late = newestTimes.findIndex((time, index) => index > 0 && time > newestTimes[index - 1]);
  const when = (index) => `${index}: ${new Date(newestTimes[index]).toISOString()}`;
  assert.equal(late, -1, `newest first, but review ${late > 0 && when(late)} is newer than review ${late > 0 && when(late - 1)}`);
  assert.ok(newest.some((review, index) => index > 0 && review.date === newest[index - 1].date), 'some of them share a day');
  for (const [sort, before] of [['rating_desc', (a, b) => a > b], ['rating_asc', (a, b) => a < b]]) {
    await clickAndSettle(page, `button[data-sort="${sort}"]`);
    await showAll(page);
    const stars = (await listed(page)).map((review) => review.stars ?? (sort === 'rating_desc' ? 0 : 6));
    assert.equal(stars.length, summary.count, `${sort} lists every review`);
    assert.ok(inOrder(stars, before), `${sort}: ${stars.join('')}`);
  }
  await page.close();
});

test('keyboard only: Tab from the top of the page reaches every control in order, Enter and Space use them', async () => {
  const { page } = await productPage();
  const focused = () => page.evaluate(() => {
    let active = document.activeElement;
    while (active?.shadowRoot?.activeElement) active = active.shadowRoot.activeElement;
    if (!active) return null;
    const name = ['data-star', 'data-sort', 'data-more'].find((attribute) => active.hasAttribute(attribute));
    if (!name) return active.tagName;
    const kind = active.classList.contains('more') ? ' (more)' : active.hasAttribute('data-clear') ? ' (clear)' : '';
    return `${name}=${active.getAttribute(name)}${kind}`;
  });
  const tab = async (backwards) => {
    if (backwards) await page.keyboard.down('Shift');
    await page.keyboard.press('Tab');
    if (backwards) await page.keyboard.up('Shift');
    return focused();
  };
  // Tab (or Shift+Tab) on until `control` has focus, round the page's end if need be.
  const tabTo = async (control, backwards = false) => {
    const path = [];
    while (path.length < 30) {
      path.push(await tab(backwards));
      if (path.at(-1) === control) return;
    }
    assert.fail(`${backwards ? 'Shift+Tab' : 'Tab'} never reaches ${control}: ${path.join(', ')}`);
  };
  // Nothing has focus yet: the first Tab starts at the top of the page, and no
  // control is focused any other way than by Tab and Shift+Tab.
  assert.equal(await focused(), 'BODY');
  const round = [];
  while (round.length < 30) {
    const now = await tab();
    if (round.includes(now)) break;
    round.push(now);
  }
  assert.deepEqual(round.filter((stop) => stop !== 'BODY'), [
    'data-star=5', 'data-star=4', 'data-star=3', 'data-star=2', 'data-star=1',
    'data-sort=helpful', 'data-sort=newest', 'data-sort=rating_desc', 'data-sort=rating_asc', 'data-sort=newest (more)',
  ], 'once round the page, Tab stops at every control once, in the order they are shown');
  // Tab on, round the page's end, to the 4-star bar: Enter filters by it; focus stays on it.
  await tabTo('data-star=4');
  await noteShown(page);
  await page.keyboard.press('Enter');
  await shownAgain(page);
  assert.equal(await focused(), 'data-star=4');
  assert.ok((await listed(page)).every((review) => review.stars === 4));
  // On to "show more": Space adds a page and keeps focus there.
  await tabTo('data-more= (more)');
  await noteShown(page);
  await page.keyboard.press('Space');
  await shownAgain(page);
  assert.ok((await listed(page)).length > 10, 'a second page');
  assert.equal(await focused(), 'data-more= (more)');
  // Shift+Tab back to a sort, and Space uses it; focus stays on it.
  await tabTo('data-sort=rating_asc', true);
  await noteShown(page);
  await page.keyboard.press('Space');
  await shownAgain(page);
  assert.equal(await page.$eval('product-reviews >>> button[data-sort="rating_asc"]', (sort) => sort.getAttribute('aria-pressed')), 'true');
  assert.equal(await focused(), 'data-sort=rating_asc');
  await page.close();
});

test('the product page and the listing page have no WCAG 2.1 A or AA violation', async () => {
  const { page } = await productPage();
  // Each bar is named for its star and its reviews, as a screen reader says it.
  const bar = await page.$('product-reviews >>> button[data-star="5"]');
  const { name } = await page.accessibility.snapshot({ root: bar });
  assert.equal(name, `5 stars, ${summary.ratings[5].toLocaleString('en')} reviews`);
  assert.deepEqual(await accessibilityViolations(page), [], 'client-rendered product page');
  await clickAndSettle(page, 'button[data-star="3"]');
  assert.deepEqual(await accessibilityViolations(page), [], 'filtered');
  for (const url of [`${api.base}/demo/products/${HOT_PRODUCT}`, `${api.base}/demo/products/${HOT_PRODUCT}?lang=ko`, await demoListingUrl()]) {
    await page.goto(url, { waitUntil: 'networkidle0' });
    assert.deepEqual(await accessibilityViolations(page), [], url);
  }
  await page.close();
});

/**
 * The demo product page's link to the listing of the demo data's 48 hottest
 * products, whose ids only the server knows how to number; read in a page of
 * its own, so that its widget's requests are counted nowhere.
 */
async function demoListingUrl() {
  const page = await browser.newPage();
  await page.goto(`${api.base}/demo/products/${HOT_PRODUCT}`);
  const url = await page.$eval('a[href^="/demo/listing"]', (link) => link.href);
  await page.close();
  return url;
}

test('a listing page of 48 <review-stars> makes exactly one API request and names each rating', async () => {
  const listing = await demoListingUrl();
  const page = await browser.newPage();
  const requests = countApiRequests(page);
  await page.goto(listing);
  await page.waitForFunction(() => [...document.querySelectorAll('review-stars')].every((stars) => stars.shadowRoot?.querySelector('[part]')));
  assert.equal(requests.length, 1, requests.join('\n'));
  assert.match(requests[0], /\/v1\/summaries\?productIds=P000000001,/);
  const labels = await page.$$eval('review-stars', (all) => all.map((stars) => stars.shadowRoot.querySelector('[role="img"]')?.getAttribute('aria-label') ?? stars.shadowRoot.textContent));
  assert.equal(labels.length, 48);
  const first = await (await fetch(`${api.base}/v1/products/P000000001/comments/summary`)).json();
  assert.equal(labels[0], `${(Math.round(first.average * 10) / 10).toFixed(1)} out of 5 stars, ${first.count.toLocaleString('en')} reviews`);
  assert.ok(labels.every((label) => /^\d\.\d out of 5 stars, [\d,]+ reviews?$|^No reviews yet\.$/.test(label)), labels.join('\n'));
  await page.close();
});

test('the widget says when it is loading, when a product has no review, and when the API cannot be reached', async () => {
  const page = await browser.newPage();
  const status = () => page.$eval('product-reviews >>> .status', (line) => line.textContent);
  // The first answer held back: the widget says it is loading.
  await page.setRequestInterception(true);
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  page.on('request', async (request) => {
    if (request.url().includes('/comments/ranked')) await held;
    request.continue();
  });
  await page.goto(`${shop.origin}/product/${HOT_PRODUCT}?api=${encodeURIComponent(api.base)}`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => document.querySelector('product-reviews')?.shadowRoot?.querySelector('.status')?.textContent === 'Loading reviews…');
  release();
  await settled(page);
  assert.match(await status(), /^Most helpful reviews: 10 shown$/);

  await page.goto(`${shop.origin}/product/P999999999?api=${encodeURIComponent(api.base)}`);
  await settled(page);
  assert.equal(await status(), 'No reviews yet.');
  assert.equal((await listed(page)).length, 0);

  const unreachable = 'http://127.0.0.1:1';
  await page.goto(`${shop.origin}/product/${HOT_PRODUCT}?api=${encodeURIComponent(unreachable)}&script=${encodeURIComponent(api.base)}`);
  await settled(page);
  assert.equal(await status(), 'Reviews could not be loaded.');
  assert.ok(await page.$('product-reviews >>> button[data-retry]'), 'a retry button');
  await page.close();
});

test('a product page needs one API request before its first list is complete', async () => {
  const { page, requests } = await productPage();
  assert.equal((await listed(page)).length, Math.min(10, summary.count));
  assert.equal(requests.length, 1, requests.join('\n'));
  await page.close();
});

test('the server-rendered first view: no layout shift through hydration, no API request, reviews without JavaScript', async () => {
  const url = `${shop.origin}/ssr/${HOT_PRODUCT}?api=${encodeURIComponent(api.base)}`;
  const still = await browser.newPage();
  await still.setJavaScriptEnabled(false);
  await still.goto(url);
  const shown = await still.$$eval('product-reviews >>> .review', (reviews) => reviews.length);
  assert.equal(shown, Math.min(10, summary.count), 'the reviews are in the page without any script');
  const height = await still.evaluate(() => document.documentElement.scrollHeight);
  await still.close();

  // The viewport holds the whole page, the shop's text below the widget
  // included: a shift anywhere on it is in view, so it is counted.
  const page = await browser.newPage();
  await page.setViewport({ width: 800, height: height + 100 });
  await page.evaluateOnNewDocument(() => {
    const describe = (entry) => ({
      value: entry.value,
      moved: entry.sources.map(({ node, previousRect: from, currentRect: to }) => `${node?.nodeName} ${node?.className || node?.textContent?.slice(0, 40) || ''}: `
        + `${from.x},${from.y} ${from.width}x${from.height} to ${to.x},${to.y} ${to.width}x${to.height}`),
    });
    window.layoutShifts = [];
    window.takeLayoutShifts = () => {
      window.layoutShifts.push(...window.layoutShiftObserver.takeRecords().filter((entry) => !entry.hadRecentInput).map(describe));
      return window.layoutShifts.splice(0);
    };
    window.layoutShiftObserver = new PerformanceObserver((entries) => {
      for (const entry of entries.getEntries()) if (!entry.hadRecentInput) window.layoutShifts.push(describe(entry));
    });
    window.layoutShiftObserver.observe({ type: 'layout-shift', buffered: true });
  });
  // Two frames on, whatever changed before has been laid out and painted, and its shifts reported.
  const shiftsSoFar = () => page.evaluate(async () => {
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    return window.takeLayoutShifts();
  });
  const requests = countApiRequests(page);
  await page.goto(url, { waitUntil: 'networkidle0' });
  // Hydration has finished: the page has loaded and the script has adopted the first view (its embedded answer taken, not busy).
  await page.waitForFunction(() => {
    const root = document.querySelector('product-reviews').shadowRoot;
    return document.readyState === 'complete' && customElements.get('product-reviews') && !root.querySelector('script')
      && root.querySelector('.widget[aria-busy="false"]');
  });
  const shifts = await shiftsSoFar();
  const shift = shifts.reduce((sum, entry) => sum + entry.value, 0);
  console.log(`layout shift through hydration: ${shift}`);
  const below = await page.evaluate(() => ({ bottom: document.querySelector('main > p').getBoundingClientRect().bottom, viewport: innerHeight }));
  assert.ok(below.bottom <= below.viewport, `the text below the widget is in view: ${JSON.stringify(below)}`);
  assert.ok(shift <= 0.01, `CLS ${shift}: ${JSON.stringify(shifts)}`);
  // A viewport as tall as the page scores a shift small (48 px of the text
  // below: 0.0002), so the first view, adopted as it is, must move nothing.
  assert.deepEqual(shifts, [], 'nothing on the page moves through hydration');
  assert.deepEqual(requests, [], 'the first view needs no API request');
  // The measure sees a shift there: the text below the widget moved down, as a widget growing would move it.
  await page.$eval('main > p', (text) => { text.style.marginTop = '3em'; });
  assert.ok((await shiftsSoFar()).some((entry) => entry.moved.some((moved) => moved.includes('Below the reviews'))), 'a shift below the widget is seen');
  // The script adopted it: the bars work.
  await clickAndSettle(page, 'button[data-star="5"]');
  assert.ok((await listed(page)).every((review) => review.stars === 5));
  await page.close();
});

test('the server-rendered markup is the markup the script renders', async () => {
  for (const lang of ['en', 'ko']) {
    const page = await browser.newPage();
    await page.goto(`${shop.origin}/ssr/${HOT_PRODUCT}?lang=${lang}&api=${encodeURIComponent(api.base)}`, { waitUntil: 'networkidle0' });
    await page.waitForFunction(() => !document.querySelector('product-reviews').shadowRoot.querySelector('script'));
    const served = await page.evaluate(() => document.querySelector('product-reviews').shadowRoot.innerHTML);
    await page.goto(`${shop.origin}/product/${HOT_PRODUCT}?lang=${lang}&api=${encodeURIComponent(api.base)}`);
    await settled(page);
    const rendered = await page.evaluate(() => document.querySelector('product-reviews').shadowRoot.innerHTML);
    assert.equal(served, rendered, lang);
    await page.close();
  }
});

test('the JSON-LD has what schema.org requires and equals what the page shows', async () => {
  const page = await browser.newPage();
  await page.goto(`${shop.origin}/ssr/${HOT_PRODUCT}?api=${encodeURIComponent(api.base)}`, { waitUntil: 'networkidle0' });
  const documents = await page.$$eval('script[type="application/ld+json"]', (scripts) => scripts.map((script) => JSON.parse(script.textContent)));
  assert.equal(documents.length, 1, 'one product per page');
  const [product] = documents;
  assert.equal(product['@context'], 'https://schema.org');
  assert.equal(product['@type'], 'Product');
  assert.equal(product.name, 'Kettle');
  const rating = product.aggregateRating;
  assert.equal(rating['@type'], 'AggregateRating');
  const shownAverage = await page.$eval('product-reviews >>> .average .value', (value) => value.textContent);
  assert.equal(rating.ratingValue.toFixed(1), shownAverage);
  const shownCount = await page.$eval('product-reviews >>> .average .count', (count) => count.textContent);
  assert.equal(`${rating.reviewCount.toLocaleString('en')} reviews`, shownCount);
  assert.equal(rating.ratingCount, [1, 2, 3, 4, 5].reduce((sum, star) => sum + summary.ratings[star], 0));
  const shown = await listed(page);
  assert.ok(product.review.length > 0);
  for (const review of product.review) {
    assert.equal(review['@type'], 'Review');
    assert.equal(review.author['@type'], 'Person');
    assert.equal(review.reviewRating['@type'], 'Rating');
    const match = shown.find((item) => item.body === review.reviewBody && item.author === review.author.name && item.date === review.datePublished);
    assert.ok(match, `review ${JSON.stringify(review)} is on the page`);
    assert.equal(review.reviewRating.ratingValue, match.stars);
  }
  assert.equal(product.review.length, shown.filter((item) => item.stars !== null).length);
  await page.close();
});

test('CORS: a page on another origin revalidates (304) and reads the ETag, request id and Age of a stale answer', async () => {
  const proxy = await cuttableProxy(process.env.REVIEWS_THRIFT_ADDR || '127.0.0.1:9090');
  const proxy2 = await cuttableProxy(process.env.REVIEWS_THRIFT2_ADDR || '127.0.0.1:9091');
  const cutOff = await startQueryApi(['--cors-origins', shop.origin, '--ranked-cache-ttl-ms', '0'], { thrift: proxy.address, thrift2: proxy2.address });
  const serverRendered = `${shop.origin}/ssr/${HOT_PRODUCT}?api=${encodeURIComponent(cutOff.base)}`;
  try {
    // The shop's server includes the first view once while HBase answers.
    assert.equal((await fetch(serverRendered)).status, 200);
    const page = await browser.newPage();
    await page.goto(`${shop.origin}/product/${HOT_PRODUCT}?api=${encodeURIComponent(cutOff.base)}`);
    await settled(page);
    const url = `${cutOff.base}/v1/products/${HOT_PRODUCT}/comments/summary`;
    const fresh = await page.evaluate(async (url) => {
      const first = await fetch(url, { cache: 'no-store' });
      const etag = first.headers.get('ETag');
      const again = await fetch(url, { cache: 'no-store', headers: { 'If-None-Match': etag, 'x-request-id': 'widget-test-1' } });
      return { etag, requestId: first.headers.get('x-request-id'), status: again.status, echoed: again.headers.get('x-request-id') };
    }, url);
    assert.match(fresh.etag ?? '', /^W\/"[0-9a-f]{32}"$/);
    assert.ok(fresh.requestId, 'the request id is readable');
    assert.equal(fresh.status, 304);
    assert.equal(fresh.echoed, 'widget-test-1');

    proxy.cut();
    proxy2.cut();
    const stale = await page.evaluate(async (url) => {
      const answer = await fetch(url, { cache: 'no-store' });
      return { status: answer.status, age: answer.headers.get('Age') };
    }, url);
    assert.equal(stale.status, 200);
    assert.match(stale.age ?? '', /^\d+$/, 'Age is readable on a stale answer');
    // The widget says it shows an earlier copy.
    await page.reload();
    await settled(page);
    assert.equal(await page.$eval('product-reviews >>> .notice', (notice) => notice.hidden), false);
    // So does the server-rendered view served from its earlier copy.
    await page.goto(serverRendered, { waitUntil: 'networkidle0' });
    await page.waitForFunction(() => customElements.get('product-reviews') && !document.querySelector('product-reviews').shadowRoot.querySelector('script'));
    assert.equal(await page.$eval('product-reviews >>> .notice', (notice) => notice.hidden), false);
    await page.close();
  } finally {
    cutOff.stop();
    proxy.close();
    proxy2.close();
  }
});

test('the script weighs at most 12 KB gzipped and is cached by its ETag', async () => {
  const { status, headers, bytes } = await new Promise((resolve, reject) => {
    http.get(`${api.base}/widget/v1/reviews.js`, { headers: { 'accept-encoding': 'gzip' } }, (response) => {
      let bytes = 0;
      response.on('data', (chunk) => { bytes += chunk.length; });
      response.on('end', () => resolve({ status: response.statusCode, headers: response.headers, bytes }));
    }).on('error', reject);
  });
  console.log(`reviews.js: ${bytes} bytes gzipped`);
  assert.equal(status, 200);
  assert.equal(headers['content-encoding'], 'gzip');
  assert.match(headers['content-type'], /^text\/javascript/);
  assert.match(headers['cache-control'], /max-age=\d{4,}/);
  assert.ok(bytes <= 12 * 1024, `${bytes} bytes`);
  const again = await fetch(`${api.base}/widget/v1/reviews.js`, { headers: { 'if-none-match': headers.etag } });
  assert.equal(again.status, 304);
});

test('Chromium gets the script, the first view and the ranked answer compressed once, and revalidates the variant it holds', async () => {
  // What the browser received for each of the service's answers, as it came over the wire: the
  // pages run with Chromium's cache off, because an earlier test's copy of the ranked answer
  // (max-age 10 s) would otherwise be served from the cache on a fast run and revalidated with a
  // 304, which carries no Content-Encoding, on a slow one. Preflights are not answers.
  const received = new Map();
  const watch = async (page) => {
    await page.setCacheEnabled(false);
    page.on('response', (response) => {
      if (response.url().startsWith(api.base) && response.request().method() === 'GET') {
        const headers = response.headers();
        received.set(new URL(response.url()).pathname, { status: response.status(), encoding: headers['content-encoding'], etag: headers.etag, vary: headers.vary });
      }
    });
  };
  // Chromium asks for brotli where it trusts the transport and gzip elsewhere: either is a prepared variant.
  const variantOf = (seen) => ({ br: '-br', gzip: '-gz' })[seen?.encoding];
  // The server-rendered view, opened as it is served: decoded, parsed, its shadow root attached.
  const view = await browser.newPage();
  await watch(view);
  await view.goto(`${api.base}/v1/products/${HOT_PRODUCT}/reviews.html`);
  const htmlPath = `/v1/products/${HOT_PRODUCT}/reviews.html`;
  assert.ok(variantOf(received.get(htmlPath)), `reviews.html compressed: ${JSON.stringify(received.get(htmlPath))}`);
  assert.equal(await view.$$eval('product-reviews >>> .review', (reviews) => reviews.length), Math.min(10, summary.count));
  await view.close();
  // The client-rendered widget: the script and its first answer arrive compressed, and it shows the reviews.
  const page = await browser.newPage();
  await watch(page);
  await page.goto(`${shop.origin}/product/${HOT_PRODUCT}?api=${encodeURIComponent(api.base)}`);
  await settled(page);
  const rankedPath = `/v1/products/${HOT_PRODUCT}/comments/ranked`;
  for (const path of ['/widget/v1/reviews.js', rankedPath]) {
    const seen = received.get(path) ?? {};
    const variant = variantOf(seen);
    assert.ok(variant, `${path} compressed: ${JSON.stringify(seen)}`);
    assert.ok(seen.etag?.endsWith(`${variant}"`), `${path}: the variant's own tag: ${JSON.stringify(seen)}`);
    assert.equal(seen.status, 200, path);
    // Chromium joins a header sent twice with a line break, and one from its cache with a comma.
    assert.match(seen.vary ?? '', /(^|[,\n] *)accept-encoding([,\n]|$)/, path);
  }
  assert.equal((await listed(page)).length, Math.min(10, summary.count), 'the widget shows the decoded answer');
  // Revalidating the variant it holds answers 304; the other variant's tag is not the one it holds.
  const url = `${api.base}${rankedPath}?include=author`;
  const revalidated = await page.evaluate(async (url) => {
    const first = await fetch(url, { cache: 'no-store' });
    const etag = first.headers.get('ETag');
    const held = await fetch(url, { cache: 'no-store', headers: { 'If-None-Match': etag } });
    const otherTag = etag.endsWith('-br"') ? etag.replace('-br"', '-gz"') : etag.replace('-gz"', '-br"');
    const other = await fetch(url, { cache: 'no-store', headers: { 'If-None-Match': otherTag } });
    return { etag, held: held.status, other: other.status, body: (await other.json()).comments.length };
  }, url);
  assert.match(revalidated.etag ?? '', /-(br|gz)"$/);
  assert.equal(revalidated.held, 304);
  assert.equal(revalidated.other, 200);
  assert.equal(revalidated.body, Math.min(10, summary.count));
  await page.close();
});
