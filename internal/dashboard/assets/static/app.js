// stackyard dashboard: keeps the open page live. The server says, by
// server-sent events, that something changed; the page then fetches its own
// content again (with the fragment header) and swaps it in. Nothing else
// travels on the stream, so it cannot show what the user may not see.
(function () {
  'use strict';
  var main = document.getElementById('main');
  var live = document.getElementById('live');
  var body = document.body;
  if (!main || !body.dataset.user) {
    return;
  }
  var boot = body.dataset.boot;
  var inflight = false;
  var pending = false;
  var timer = null;
  var connectedOnce = false;

  // editing: a field of the page holds something the user typed; a swap
  // would lose it, so the refresh waits until the field is left.
  function editing() {
    var a = document.activeElement;
    return a && main.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName) && a.value !== '';
  }

  function setLive(on, text) {
    if (live) {
      live.textContent = text;
      live.className = 'live ' + (on ? 'on' : 'off');
    }
  }

  function refresh() {
    if (inflight || editing()) {
      pending = true;
      return;
    }
    inflight = true;
    var here = location.pathname + location.search;
    fetch(here, { headers: { 'X-Stackyard-Fragment': '1' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (res) {
        if (res.status === 401) {
          location.href = '/login?next=' + encodeURIComponent(here);
          return null;
        }
        return res.ok ? res.text() : null;
      })
      .then(function (html) {
        if (html !== null && html !== undefined) {
          // What the reader opened (a resource's diff, the code's diff)
          // stays open across the swap.
          var opened = [];
          main.querySelectorAll('details[open][data-key]').forEach(function (d) { opened.push(d.dataset.key); });
          main.innerHTML = html;
          main.querySelectorAll('details[data-key]').forEach(function (d) {
            if (opened.indexOf(d.dataset.key) >= 0) {
              d.open = true;
            }
          });
          body.dataset.refreshed = String(Date.now());
        }
      })
      .catch(function () { pending = true; })
      .then(function () {
        inflight = false;
        if (pending) {
          pending = false;
          schedule();
        }
      });
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 100);
  }

  main.addEventListener('focusout', function () {
    if (pending) {
      pending = false;
      schedule();
    }
  });

  var source = null;
  function connect() {
    source = new EventSource('/events');
    source.addEventListener('hello', function (e) {
      setLive(true, 'live');
      // A new server (an operator restart) or a reconnect may have missed
      // changes: look again.
      if (connectedOnce || e.data !== boot) {
        boot = e.data;
        body.dataset.boot = boot;
        schedule();
      }
      connectedOnce = true;
    });
    source.addEventListener('change', schedule);
    source.onerror = function () {
      setLive(false, 'reconnecting…');
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (an error answer, not a dropped line): try
        // again ourselves.
        source = null;
        setTimeout(connect, 2000);
      }
    };
  }
  connect();
})();
