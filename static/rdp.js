// rdp.js: the RDP viewer of the console page, an ES module that
// <corral-rdp> (console.js) imports on first use. It shows a small sign-in
// form; on Connect it asks the server for a token (POST to the element's
// token URL: one use, one minute, bound to this instance and this user),
// then mounts IronRDP's web component <iron-remote-desktop> with the RDP
// backend and connects through Corral's RDCleanPath proxy over wss.
//
// The user name and password go from the form into IronRDP's config and
// nowhere else: not stored, not sent to Corral except inside the RDP
// stream, and the password field is cleared as soon as it is read.
//
//   <corral-rdp token="/rdp-token/REF" script="…/rdp.HASH.js"
//               module="…/iron-remote-desktop.HASH.js" backend="…/iron-remote-desktop-rdp.HASH.js">
//
// mount(el) returns {close()}; el.ui is IronRDP's UserInteraction while a
// session runs (for tests and scripts), el.dataset.state as for the other
// console elements.

let backendReady = null; // the RDP backend's wasm, initialised once per page

async function loadBackend(url) {
  if (!backendReady) {
    backendReady = import(url).then(async (m) => {
      await m.init('WARN');
      return m.Backend;
    });
    backendReady.catch(() => { backendReady = null; });
  }
  return backendReady;
}

function proxyURL(path) {
  const u = new URL(path, location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

// desktopSize fits the remote desktop to the space the page gives it,
// within what RDP servers accept. The width stays a multiple of 32: a
// server pads a bitmap at the right edge of a desktop whose width is not a
// multiple of 4, and IronRDP 0.7.0 draws padded bitmaps sheared
// (docs/consoles.md); xrdp also centres its login dialog on it.
function desktopSize(area) {
  const w = Math.max(800, Math.min(1920, Math.floor(area.clientWidth || 1024)));
  const h = Math.max(600, Math.min(1080, Math.floor(w * 0.625)));
  return { width: w & ~31, height: h & ~1 };
}

// The messages the web client's errors map to (RDCleanPath error PDUs
// carry an HTTP status, a socket error or a TLS alert).
function explain(err) {
  const d = typeof err?.rdcleanpathDetails === 'function' ? err.rdcleanpathDetails() : undefined;
  if (d?.httpStatusCode === 401) return 'The connection token was refused (expired or used); connect again.';
  if (d?.httpStatusCode === 403) return 'This console is not yours to open.';
  if (d?.httpStatusCode === 409) return 'The instance is not running.';
  if (d?.httpStatusCode) return `The RDP proxy refused the connection (HTTP ${d.httpStatusCode}).`;
  if (d?.wsaErrorCode === 10061) return 'Nothing accepts RDP connections on the instance (connection refused).';
  if (d?.wsaErrorCode === 10060) return 'The instance did not answer in time.';
  if (d?.wsaErrorCode) return `The connection to the instance failed (socket error ${d.wsaErrorCode}).`;
  if (d?.tlsAlertCode) return `The instance's TLS handshake failed (alert ${d.tlsAlertCode}).`;
  if (typeof err?.kind === 'function') {
    const names = ['General', 'WrongPassword', 'LogonFailure', 'AccessDenied', 'RDCleanPath', 'ProxyConnect', 'NegotiationFailure'];
    const k = err.kind();
    if (k === 1 || k === 2) return 'The user name or password was not accepted.';
    return `The RDP connection failed (${names[k] ?? k}).`;
  }
  return `The RDP connection failed: ${err?.message ?? err}`;
}

export function mount(el) {
  const status = document.createElement('p');
  status.className = 'console-status';
  status.setAttribute('data-testid', 'console-status');
  status.setAttribute('aria-live', 'polite');

  const form = document.createElement('form');
  form.className = 'rdp-login';
  form.setAttribute('data-testid', 'rdp-form');
  form.innerHTML = `
    <label>User <input name="username" autocomplete="username" required data-testid="rdp-username"></label>
    <label>Password <input name="password" type="password" autocomplete="current-password" data-testid="rdp-password"></label>
    <button type="submit" data-testid="rdp-connect">Connect</button>`;

  const area = document.createElement('div');
  area.className = 'console-area rdp-area';
  el.append(status, form, area);

  let remote = null; // the <iron-remote-desktop> of the current session
  let closed = false;
  const setState = (state, text) => {
    el.dataset.state = state;
    status.textContent = text;
  };
  setState('disconnected', 'Sign in to the instance\'s desktop.');

  const end = (state, text) => {
    if (remote) {
      try { el.ui?.shutdown(); } catch { /* the session is gone already */ }
      remote.remove();
      remote = null;
    }
    el.ui = null;
    form.hidden = false;
    setState(state, text);
  };

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (remote) return;
    const username = form.username.value;
    const password = form.password.value;
    form.password.value = '';
    form.hidden = true;
    setState('connecting', 'Connecting…');
    try {
      const [Backend] = await Promise.all([
        loadBackend(el.getAttribute('backend')),
        import(el.getAttribute('module')), // defines <iron-remote-desktop>
      ]);
      const res = await fetch(el.getAttribute('token'), {
        method: 'POST', credentials: 'same-origin', headers: { Accept: 'application/json' },
      });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        throw new Error(body.error || `HTTP ${res.status}`);
      }
      const grant = await res.json();
      if (closed) return;

      remote = document.createElement('iron-remote-desktop');
      remote.module = Backend; // read when the component is created
      remote.setAttribute('scale', 'fit');
      remote.setAttribute('flexcenter', 'true');
      remote.setAttribute('data-testid', 'rdp-screen');
      const ready = new Promise((resolve) => {
        remote.addEventListener('ready', (e) => resolve(e.detail.irgUserInteraction), { once: true });
      });
      area.append(remote);
      const ui = await ready;
      if (closed) return;
      el.ui = ui;
      const config = ui.configBuilder()
        .withUsername(username)
        .withPassword(password)
        .withDestination(grant.destination)
        .withProxyAddress(proxyURL(grant.socket))
        .withAuthToken(grant.token)
        .withDesktopSize(desktopSize(area))
        .build();
      const session = await ui.connect(config);
      if (closed) return;
      ui.setVisibility(true);
      setState('connected', 'Connected');
      session.run().then(
        (info) => { if (!closed) end('disconnected', `The session ended${info?.reason?.() ? `: ${info.reason()}` : ''}.`); },
        (err) => { if (!closed) end('error', explain(err)); },
      );
    } catch (err) {
      console.warn('corral: rdp connection failed', err);
      if (!closed) end('error', explain(err));
    }
  });

  return {
    close() {
      closed = true;
      end('disconnected', '');
    },
  };
}
