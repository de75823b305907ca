// app.js: the few lines htmx does not cover. The page works without it.
// It shows whether the live-update stream is connected and clears an old
// error message once a later request succeeds.
(function () {
  'use strict';
  function live(on) {
    var el = document.getElementById('live');
    if (el) el.classList.toggle('on', on);
  }
  document.addEventListener('htmx:sse:after:connection', function () { live(true); });
  document.addEventListener('htmx:sse:error', function () { live(false); });
  document.addEventListener('htmx:sse:close', function () { live(false); });
  document.addEventListener('htmx:after:request', function (e) {
    var ctx = e.detail && e.detail.ctx;
    var flash = document.getElementById('flash');
    if (!flash || !ctx || !ctx.response || ctx.response.status >= 400) return;
    if (ctx.request && ctx.request.method !== 'GET') flash.textContent = '';
  });
})();
