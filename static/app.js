// app.js: the few lines htmx does not cover. The page works without it.
// It shows whether the live-update stream is connected and clears an old
// error message once a later request succeeds, and it turns drag-and-drop
// onto a folder into the folder tree's own drop forms (which htmx posts).
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

  // Drag-and-drop: an inventory row or a folder dragged onto a folder.
  // The drop fills one of the hidden forms of #folders and submits it, so
  // the change goes through the same route and checks as the visible forms.
  var REF = 'application/x-corral-ref', FOLDER = 'application/x-corral-folder';
  document.addEventListener('dragstart', function (e) {
    var row = e.target.closest && e.target.closest('[data-testid="instance-row"]');
    var folder = e.target.closest && e.target.closest('[data-testid="folder"]');
    if (row) e.dataTransfer.setData(REF, row.dataset.ref);
    else if (folder) e.dataTransfer.setData(FOLDER, folder.dataset.folder);
    else return;
    e.dataTransfer.effectAllowed = 'move';
    if (folder) e.stopPropagation();
  });
  function target(e) {
    var t = e.target.closest && e.target.closest('#folders [data-folder]');
    if (!t) return null;
    var types = Array.prototype.slice.call(e.dataTransfer.types || []);
    return types.indexOf(REF) >= 0 || types.indexOf(FOLDER) >= 0 ? t : null;
  }
  document.addEventListener('dragover', function (e) {
    var t = target(e);
    if (!t) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'move';
    t.classList.add('drop-over');
  });
  document.addEventListener('dragleave', function (e) {
    var t = target(e);
    if (t) t.classList.remove('drop-over');
  });
  document.addEventListener('drop', function (e) {
    var t = target(e);
    if (!t) return;
    e.preventDefault();
    t.classList.remove('drop-over');
    var ref = e.dataTransfer.getData(REF), from = e.dataTransfer.getData(FOLDER);
    var form = document.getElementById(ref ? 'folder-drop-member' : 'folder-drop-folder');
    if (!form || (!ref && !from) || from === t.dataset.folder) return;
    if (ref) {
      form.elements.path.value = t.dataset.folder;
      form.elements.ref.value = ref;
    } else {
      form.elements.from.value = from;
      form.elements.parent.value = t.dataset.folder;
    }
    form.requestSubmit();
  });
})();
