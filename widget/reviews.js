// The reference review widgets, served by query-api at /widget/v1/reviews.js:
//
//   <product-reviews product-id="…" lang="en|ko" api="…">  a product page's reviews
//   <review-stars product-id="…" lang="en|ko" api="…">     a listing page's stars
//
// Dependency-free, one classic script (load it with `defer`). `api` is the
// service's base URL, by default the origin this script came from. Each element
// renders into an open shadow root, so a shop's CSS cannot break it; it is
// themed through CSS custom properties (--reviews-*) and ::part().
//
// query-api fills in MESSAGES (widget/messages.json) and STYLE
// (widget/reviews.css) when it serves this file, and renders the same markup
// on the server for /v1/products/{id}/reviews.html (query-api/src/widget.rs):
// a <product-reviews> that arrives with a declarative shadow root adopts it
// and its embedded first answer instead of fetching again. Change the markup
// here and there together; the browser tests compare the two.
(() => {
  'use strict';
  const MESSAGES = /*MESSAGES*/ {};
  const STYLE = /*STYLE*/ '';
  const PAGE_SIZE = 10;
  const SUMMARIES_PER_REQUEST = 100;
  const SORTS = ['helpful', 'newest', 'rating_desc', 'rating_asc'];
  const scriptOrigin = document.currentScript ? new URL(document.currentScript.src, location.href).origin : location.origin;

  const language = (element) => ((element.closest('[lang]') || {}).lang || 'en').toLowerCase().startsWith('ko') ? 'ko' : 'en';
  const apiOf = (element) => (element.getAttribute('api') || scriptOrigin).replace(/\/+$/, '');

  const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

  // A message of `lang`, its plural form chosen by `count`, placeholders filled with `values` (already formatted).
  const say = (lang, key, count, values) => {
    let message = MESSAGES[lang][key];
    if (typeof message === 'object') message = message[new Intl.PluralRules(lang).select(count)] || message.other;
    return message.replace(/\{(\w)\}/g, (_, name) => values[name]);
  };
  const number = (lang, n) => new Intl.NumberFormat(lang).format(n);
  // Averages are rounded to one decimal before formatting, the same way the server does.
  const rounded = (average) => Math.round(average * 10) / 10;
  const decimal = (lang, n) => new Intl.NumberFormat(lang, { minimumFractionDigits: 1, maximumFractionDigits: 1 }).format(n);
  // Dates from 1970 to 9999 are shown; other timestamps (seconds mistaken
  // for microseconds, say) show none, on the server too.
  const LAST_MS = 253402300799999;
  const dated = (ms) => Number.isInteger(ms) && ms >= 0 && ms <= LAST_MS;
  const date = (lang, ms) => (dated(ms) ? new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeZone: 'UTC' }).format(new Date(ms)) : '');
  const isoDate = (ms) => (dated(ms) ? new Date(ms).toISOString().slice(0, 10) : '');
  // A review's stars: an integer 1 to 5, or its digit as a string; anything else is unrated.
  const starsOf = (rating) => {
    const stars = typeof rating === 'string' && rating.length === 1 ? Number(rating) : rating;
    return Number.isInteger(stars) && stars >= 1 && stars <= 5 ? stars : null;
  };
  const starsImage = (label, rating, part) =>
    `<span class="stars"${part ? ` part="${part}"` : ''} role="img" aria-label="${escapeHtml(label)}" style="--rating:${rating}"></span>`;

  const fetchJson = async (url) => {
    const response = await fetch(url, { credentials: 'omit' });
    if (!response.ok) throw new Error(`${response.status} from ${url}`);
    // A kept copy served while the review store fails carries Age and max-age=0.
    const stale = response.headers.has('Age') && /max-age=0/.test(response.headers.get('Cache-Control') || '');
    return { body: await response.json(), stale };
  };

  // ---- <product-reviews> ----------------------------------------------------

  const reviewHtml = (lang, review) => {
    const stars = starsOf(review.rating);
    const author = review.author && review.author.nickname ? review.author.nickname : say(lang, 'anonymous', 1, {});
    const photos = review.photos > 0 ? `<span class="photo-count">${say(lang, 'photos', review.photos, { n: number(lang, review.photos) })}</span>` : '';
    return `<li class="review" part="review" id="review-${review.id}">`
      + '<p class="meta">'
      + (stars ? starsImage(say(lang, 'rated', stars, { v: number(lang, stars) }), stars, '') : '')
      + `<span class="author" part="author">${escapeHtml(author)}</span>`
      + `<time datetime="${isoDate(review.timestamp)}">${date(lang, review.timestamp)}</time>`
      + (review.edited ? `<span class="edited">${say(lang, 'edited', 1, {})}</span>` : '')
      + photos
      + '</p>'
      + `<p class="body" part="body">${escapeHtml(review.content || '')}</p>`
      + '</li>';
  };

  const summaryHtml = (lang, summary, star) => {
    if (!summary || summary.count === 0) return '';
    const label = summary.average === null ? '' : starsImage(
      say(lang, 'rated', 1, { v: decimal(lang, rounded(summary.average)) }), rounded(summary.average), 'average');
    const value = summary.average === null ? '' : `<span class="value" aria-hidden="true">${decimal(lang, rounded(summary.average))}</span>`;
    let bars = '';
    for (let k = 5; k >= 1; k -= 1) {
      const n = summary.ratings[k];
      const width = summary.count > 0 ? Math.round((n * 100) / summary.count) : 0;
      // Named by what it shows ("5 stars, 77 reviews"); the comma is for screen readers only.
      bars += `<li><button type="button" part="bar" data-star="${k}" aria-pressed="${star === k}">`
        + `<span>${say(lang, 'stars', k, { k: number(lang, k) })}<span class="comma">,</span></span>`
        + `<span class="track" aria-hidden="true"><span class="fill" style="width:${width}%"></span></span>`
        + `<span class="n">${say(lang, 'reviews', n, { n: number(lang, n) })}</span>`
        + '</button></li>';
    }
    return '<div class="summary" part="summary">'
      + `<p class="average">${label}${value}<span class="count">${say(lang, 'reviews', summary.count, { n: number(lang, summary.count) })}</span></p>`
      + `<ul class="histogram" aria-label="${escapeHtml(say(lang, 'filters', 1, {}))}">${bars}</ul>`
      + `<p class="photos-count">${say(lang, 'withPhotos', summary.withPhotos, { n: number(lang, summary.withPhotos) })}</p>`
      + '</div>';
  };

  const sortsHtml = (lang, sort, star) => `<div class="sorts" role="group" aria-label="${escapeHtml(say(lang, 'sorts', 1, {}))}">`
    + SORTS.map((key) => `<button type="button" data-sort="${key}" aria-pressed="${sort === key && star === null}">${say(lang, key, 1, {})}</button>`).join('')
    + (star === null ? '' : `<button type="button" data-sort="newest" data-clear="" aria-pressed="false">${say(lang, 'allStars', 1, {})}</button>`)
    + '</div>';

  // What the status line says: the list shown, how many reviews it holds, how many are shown.
  const statusText = (state) => {
    const { lang, summary, sort, star, reviews } = state;
    if (state.error) return say(lang, 'error', 1, {});
    if (state.loading && !summary) return say(lang, 'loading', 1, {});
    if (!summary || summary.count === 0) return say(lang, 'empty', 1, {});
    const shown = number(lang, reviews.length);
    if (star !== null) {
      const n = summary.ratings[star];
      return say(lang, 'statusStar', n, { k: number(lang, star), n: number(lang, n), s: shown });
    }
    if (sort === 'helpful') return say(lang, 'statusHelpful', reviews.length, { n: shown });
    return say(lang, 'statusAll', summary.count, { n: number(lang, summary.count), s: shown });
  };

  const moreHtml = (state) => {
    const { lang, summary, sort, star, cursor } = state;
    if (state.error) return `<button type="button" class="retry" data-retry="">${say(lang, 'retry', 1, {})}</button>`;
    if (!summary || summary.count === 0) return '';
    if (sort === 'helpful' && star === null) {
      return summary.count > state.reviews.length
        ? `<button type="button" class="more" data-sort="newest">${say(lang, 'all', summary.count, { n: number(lang, summary.count) })}</button>` : '';
    }
    return cursor ? `<button type="button" class="more" data-more="">${say(lang, 'more', 1, {})}</button>` : '';
  };

  // The widget above its status line: heading, summary, sorts, the stale notice.
  const topHtml = (state) => {
    const { lang, summary, sort, star } = state;
    return `<h2 id="heading" part="heading">${say(lang, 'heading', 1, {})}</h2>`
      + summaryHtml(lang, summary, star)
      + (summary && summary.count > 0 ? sortsHtml(lang, sort, star) : '')
      + `<p class="notice" part="notice"${state.stale ? '' : ' hidden'}>${say(lang, 'stale', 1, {})}</p>`;
  };

  // The widget below its status line: the list and its "show more".
  const bottomHtml = (state) => `<ol class="list" part="list">${state.reviews.map((review) => reviewHtml(state.lang, review)).join('')}</ol>`
    + moreHtml(state);

  // The whole widget for `state`: the server renders the same for the first view.
  const widgetHtml = (state) => `<section class="widget" part="container" aria-labelledby="heading" aria-busy="${state.loading}">`
    + `<div class="top">${topHtml(state)}</div>`
    + `<p class="status" role="status">${escapeHtml(statusText(state))}</p>`
    + `<div class="bottom">${bottomHtml(state)}</div>`
    + '</section>';

  class ProductReviews extends HTMLElement {
    connectedCallback() {
      if (this.state) return;
      const lang = language(this);
      this.state = { lang, summary: null, sort: 'helpful', star: null, reviews: [], cursor: null, loading: true, error: false, stale: false };
      // A first view rendered by the server: adopt its markup and the answer it embeds.
      const embedded = this.shadowRoot && this.shadowRoot.querySelector('script[type="application/json"]');
      if (embedded) {
        const first = JSON.parse(embedded.textContent);
        embedded.remove();
        // A view served from an earlier copy while the review store fails shows its notice.
        const stale = !this.shadowRoot.querySelector('.notice').hidden;
        Object.assign(this.state, { summary: first.summary, reviews: first.comments, loading: false, stale });
      } else {
        if (!this.shadowRoot) this.attachShadow({ mode: 'open' });
        this.paint();
        this.load(true);
      }
      this.shadowRoot.addEventListener('click', (event) => this.onClick(event));
    }

    paint() {
      const focused = this.shadowRoot.activeElement;
      const focusKey = focused && ['data-star', 'data-sort', 'data-more', 'data-retry'].find((name) => focused.hasAttribute(name));
      const focusValue = focusKey && focused.getAttribute(focusKey);
      const section = this.shadowRoot.querySelector('.widget');
      if (section) {
        // The status line stays the same element, so screen readers announce its new text.
        section.setAttribute('aria-busy', String(this.state.loading));
        section.querySelector('.top').innerHTML = topHtml(this.state);
        section.querySelector('.status').textContent = statusText(this.state);
        section.querySelector('.bottom').innerHTML = bottomHtml(this.state);
      } else {
        this.shadowRoot.innerHTML = `<style>${STYLE}</style>${widgetHtml(this.state)}`;
      }
      // A keyboard user keeps their place: focus returns to the control they used, or to the list.
      if (focusKey) {
        const again = this.shadowRoot.querySelector(`[${focusKey}="${focusValue}"]:not([data-clear])`) || this.shadowRoot.querySelector('.list');
        if (again === this.shadowRoot.querySelector('.list')) again.tabIndex = -1;
        again.focus();
      }
    }

    // Reads the list asked for: the ranking with the summary (the first view),
    // or a page of the newest or rating-ordered reviews, of one star or all.
    async load(first) {
      const state = this.state;
      const product = encodeURIComponent(this.getAttribute('product-id') || '');
      const base = `${apiOf(this)}/v1/products/${product}/comments`;
      let url;
      if (state.sort === 'helpful' && state.star === null) url = `${base}/ranked?include=author`;
      else {
        url = `${base}?include=author&limit=${PAGE_SIZE}`;
        if (state.star !== null) url += `&rating=${state.star}`;
        if (state.sort !== 'helpful' && state.sort !== 'newest') url += `&sort=${state.sort}`;
        if (!first && state.cursor) url += `&cursor=${encodeURIComponent(state.cursor)}`;
      }
      state.loading = true;
      state.error = false;
      const section = this.shadowRoot.querySelector('.widget');
      if (section) section.setAttribute('aria-busy', 'true');
      try {
        const { body, stale } = await fetchJson(url);
        if (this.state !== state) return;
        if (body.summary !== undefined) state.summary = body.summary;
        state.reviews = first ? body.comments : state.reviews.concat(body.comments);
        state.cursor = body.nextCursor;
        state.stale = stale;
      } catch (error) {
        state.error = true;
      }
      state.loading = false;
      this.paint();
    }

    onClick(event) {
      const control = event.target.closest('button');
      if (!control || this.state.loading) return;
      const state = this.state;
      if (control.hasAttribute('data-more')) return this.load(false);
      if (control.hasAttribute('data-retry')) return this.load(!state.cursor);
      if (control.hasAttribute('data-star')) {
        const star = Number(control.getAttribute('data-star'));
        state.star = state.star === star ? null : star;
        if (state.star !== null && state.sort === 'helpful') state.sort = 'newest';
        if (state.star === null) state.sort = 'helpful';
      } else if (control.hasAttribute('data-sort')) {
        state.sort = control.getAttribute('data-sort');
        if (control.hasAttribute('data-clear') || state.sort !== 'newest' || control.classList.contains('more')) state.star = null;
      } else return;
      state.cursor = null;
      this.load(true);
    }
  }

  // ---- <review-stars> -------------------------------------------------------

  // Elements waiting for their summary, by API base: filled together, one
  // /v1/summaries request per hundred products.
  const waiting = new Map();
  let flushQueued = false;

  const starsHtml = (lang, summary) => {
    if (!summary || summary.count === 0) return `<span class="none" part="count">${say(lang, 'empty', 1, {})}</span>`;
    const count = number(lang, summary.count);
    if (summary.average === null) return `<span class="count" part="count">${say(lang, 'reviews', summary.count, { n: count })}</span>`;
    const value = rounded(summary.average);
    return starsImage(say(lang, 'ratedWithCount', summary.count, { v: decimal(lang, value), n: count }), value, 'stars')
      + `<span class="count" part="count" aria-hidden="true">(${count})</span>`;
  };

  const fill = (element, summary) => {
    element.shadowRoot.innerHTML = `<style>${STYLE}:host{display:inline-flex;gap:.25em;align-items:baseline;min-height:1.2em}</style>${starsHtml(language(element), summary)}`;
  };

  // An id the API takes in a list: ten printable characters but `/` and `,`.
  const listable = (id) => typeof id === 'string' && /^[ -+\-.0-~]{10}$/.test(id);

  const flush = async () => {
    flushQueued = false;
    const batches = [...waiting.entries()];
    waiting.clear();
    for (const [api, all] of batches) {
      // An element without a usable id shows no rating, and cannot spoil the others' request.
      const elements = [];
      for (const element of all) {
        if (listable(element.getAttribute('product-id'))) elements.push(element);
        else fill(element, null);
      }
      const ids = [...new Set(elements.map((element) => element.getAttribute('product-id')))];
      for (let start = 0; start < ids.length; start += SUMMARIES_PER_REQUEST) {
        const chunk = ids.slice(start, start + SUMMARIES_PER_REQUEST);
        const query = chunk.map(encodeURIComponent).join(',');
        fetchJson(`${api}/v1/summaries?productIds=${query}`).then(({ body }) => {
          const byId = new Map(chunk.map((id, index) => [id, body.summaries[index]]));
          for (const element of elements) {
            if (byId.has(element.getAttribute('product-id'))) fill(element, byId.get(element.getAttribute('product-id')));
          }
        }, () => {});
      }
    }
  };

  class ReviewStars extends HTMLElement {
    connectedCallback() {
      if (this.shadowRoot) return;
      this.attachShadow({ mode: 'open' });
      const api = apiOf(this);
      if (!waiting.has(api)) waiting.set(api, []);
      waiting.get(api).push(this);
      if (!flushQueued) {
        flushQueued = true;
        // Every element the parser has upgraded by now joins the same request.
        setTimeout(flush, 0);
      }
    }
  }

  if (!customElements.get('product-reviews')) customElements.define('product-reviews', ProductReviews);
  if (!customElements.get('review-stars')) customElements.define('review-stars', ReviewStars);
})();
