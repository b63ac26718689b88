/*
 * idem-client.js: a client of your own API that keeps one Idempotency-Key per intent, for browsers
 * and Node 18+ (fetch). No dependencies. Served by a servlet container at /idem/idem-client.js
 * from the idem-http jar (and by Spring Boot as a static resource). docs/http.md#client.
 *
 *   const r = await IdemClient.send('order-o1/payment', '/payments',
 *       {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(payment)});
 *
 * Guaranteed, as idem's Java client (OwnApiCalls):
 * - the intent's key is minted once and stored (localStorage in a browser) BEFORE the first send;
 *   a page reloaded, a tab closed, a browser restarted finds the same key and retries with it;
 * - every attempt sends that key; retried: a network failure and 408, 409, 425, 429, 500, 502, 503,
 *   504, with exponential back-off and full jitter, never less than a Retry-After (seconds or an
 *   HTTP-date); at most maxAttempts attempts (4); a Retry-After over maxRetryAfter (10 s) stops;
 * - never retried: any other 4xx (422 for a key reused with another request, 400, ...);
 * - the key is released only on a definitive answer: a 2xx, or a 4xx that is not retried. When the
 *   retries run out, or the page goes away, the key stays for the next send of the intent.
 * Not guaranteed: one effect if the server forgets the key before the retry comes, or if one
 * intent is used for two different requests. The intent names the thing to do, never the attempt.
 */
(function (root, factory) {
  if (typeof module === 'object' && module.exports) {
    module.exports = factory();
  } else {
    root.IdemClient = factory();
  }
})(typeof self !== 'undefined' ? self : this, function () {
  'use strict';

  var RETRY_STATUSES = [408, 409, 425, 429, 500, 502, 503, 504];
  var DEFAULTS = {
    header: 'Idempotency-Key',
    maxAttempts: 4,
    firstBackoff: 100,   // ms: the ceiling before the first retry, doubled per retry
    maxBackoff: 2000,    // ms
    maxRetryAfter: 10000 // ms: a longer Retry-After stops the retries
  };

  function checkIntent(intent) {
    if (typeof intent !== 'string' || intent.trim() === '') {
      throw new TypeError('intent must be a non-blank string naming the thing to do once, e.g. "order-o1/payment"');
    }
    if (intent.length > 255) {
      throw new RangeError('intent is ' + intent.length + ' characters long; at most 255 are allowed');
    }
    if (/[\u0000-\u001f\u007f-\u009f]/.test(intent)) {
      throw new TypeError('intent must not contain control characters');
    }
    return intent;
  }

  /** A UUIDv7: 48 bits of Unix milliseconds, version 7, random bits (a partitioned key table takes it). */
  function mintKey() {
    var b = new Uint8Array(16);
    (typeof crypto !== 'undefined' ? crypto : require('crypto').webcrypto).getRandomValues(b);
    var ms = Date.now();
    for (var i = 5; i >= 0; i--) {
      b[i] = ms % 256;
      ms = Math.floor(ms / 256);
    }
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    var h = Array.prototype.map.call(b, function (x) { return (x + 0x100).toString(16).slice(1); }).join('');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
  }

  /**
   * Keys in a Web Storage (localStorage by default), under prefix + intent. A store is any object
   * with keyFor(intent) and release(intent), either may return a promise; keyFor must have stored
   * the key durably before it returns.
   */
  function storageKeys(storage, prefix) {
    var s = storage || (typeof localStorage !== 'undefined' ? localStorage : null);
    if (!s) {
      throw new TypeError('no localStorage here (Node?): pass a store, e.g. IdemClient.memoryKeys() or your own');
    }
    var p = prefix === undefined ? 'idem-intent:' : prefix;
    return {
      keyFor: function (intent) {
        var stored = s.getItem(p + checkIntent(intent));
        if (stored) {
          return stored;
        }
        var key = mintKey();
        s.setItem(p + intent, key); // synchronous: stored before anything is sent
        return key;
      },
      release: function (intent) {
        s.removeItem(p + checkIntent(intent));
      }
    };
  }

  /** Keys in memory: they survive retries, not a reload. For tests, or with your own persistence. */
  function memoryKeys() {
    var keys = new Map();
    return {
      keyFor: function (intent) {
        if (!keys.has(checkIntent(intent))) {
          keys.set(intent, mintKey());
        }
        return keys.get(intent);
      },
      release: function (intent) {
        keys.delete(checkIntent(intent));
      }
    };
  }

  /** The wait a Retry-After asks for, in ms, or null when absent or unreadable. */
  function retryAfter(value, now) {
    if (value === null || value === undefined || String(value).trim() === '') {
      return null;
    }
    var v = String(value).trim();
    if (/^\d+$/.test(v)) {
      return Number(v) * 1000;
    }
    var at = Date.parse(v);
    return isNaN(at) ? null : Math.max(0, at - now);
  }

  function definitive(status) {
    return (status >= 200 && status <= 299) || (status >= 400 && status <= 499 && RETRY_STATUSES.indexOf(status) < 0);
  }

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  /**
   * Sends a request for the intent with its stored key, retrying as the header comment says.
   * options: keys (a store; default localStorage), fetch, header, maxAttempts, firstBackoff,
   * maxBackoff, maxRetryAfter (ms). Resolves to the last Response; rejects with the last network
   * error when every attempt failed without a reply (the key stays stored).
   */
  async function send(intent, url, init, options) {
    checkIntent(intent);
    var o = Object.assign({}, DEFAULTS, options || {});
    if (!(o.maxAttempts >= 1 && o.maxAttempts <= 10)) {
      throw new RangeError('maxAttempts must be 1 to 10, was ' + o.maxAttempts);
    }
    var request = Object.assign({}, init || {});
    if (typeof ReadableStream !== 'undefined' && request.body instanceof ReadableStream) {
      throw new TypeError('init.body must be repeatable (a string, Blob, FormData, ...), not a stream: every retry sends it again');
    }
    var headers = new Headers(request.headers || {});
    if (headers.has(o.header)) {
      throw new TypeError('init.headers already carries ' + o.header + ': remove it; the key sent is the intent\'s');
    }
    var keys = o.keys || storageKeys();
    var doFetch = o.fetch || fetch;
    var key = await keys.keyFor(intent); // stored before the first send
    headers.set(o.header, key);
    request.headers = headers;
    for (var attempt = 1; ; attempt++) {
      var response = null;
      var failure = null;
      try {
        response = await doFetch(url, request);
      } catch (e) {
        if (e && e.name === 'AbortError') {
          throw e; // the caller gave up: the key stays
        }
        failure = e;
      }
      if (response && RETRY_STATUSES.indexOf(response.status) < 0) {
        if (definitive(response.status)) {
          await keys.release(intent);
        }
        return response;
      }
      var asked = response ? retryAfter(response.headers.get('Retry-After'), Date.now()) : null;
      if (attempt >= o.maxAttempts || (asked !== null && asked > o.maxRetryAfter)) {
        if (response) {
          return response;
        }
        throw failure;
      }
      var ceiling = Math.min(o.maxBackoff, o.firstBackoff * Math.pow(2, attempt - 1));
      var backoff = Math.random() * ceiling; // full jitter
      await sleep(asked !== null && asked > backoff ? asked : backoff);
    }
  }

  return {
    send: send,
    storageKeys: storageKeys,
    memoryKeys: memoryKeys,
    mintKey: mintKey,
    RETRY_STATUSES: RETRY_STATUSES.slice()
  };
});
