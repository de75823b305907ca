// console.js: the custom elements of the console page, loaded on that page
// only (as a module). Each element owns its socket: it connects when it
// enters the document, closes when it leaves (so an htmx swap that removes
// it closes the socket cleanly) and reconnects by itself with backoff when
// the connection drops. The viewer libraries are imported on first use
// from the hashed URL the page puts in the element's attributes.
//
//   <corral-vnc src="/ws/vnc/REF" module="…/novnc.HASH/core/rfb.js">
//   <corral-serial src="/ws/serial/REF" module="…/xterm.HASH.mjs" fit="…/addon-fit.HASH.mjs">
//   <corral-rdp token="/rdp-token/REF" script="…/rdp.HASH.js" module=… backend=…>
//
// <corral-rdp> is the exception to reconnecting: an RDP session needs the
// user's password, so rdp.js (imported from script) shows a sign-in form
// and connects when the user asks.
//
// Both expose their viewer for tests and scripts: vnc.rfb, serial.term.
// data-state is "connecting", "connected", "disconnected" or "error".

const FIRST_DELAY = 500; // ms before the first reconnect
const MAX_DELAY = 15000;

function socketURL(src) {
  const u = new URL(src, location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

class ConsoleElement extends HTMLElement {
  connectedCallback() {
    if (!this.screen) {
      this.statusLine = document.createElement('p');
      this.statusLine.className = 'console-status';
      this.statusLine.setAttribute('data-testid', 'console-status');
      this.statusLine.setAttribute('aria-live', 'polite');
      this.screen = document.createElement('div');
      this.screen.className = 'console-area';
      this.append(this.statusLine, this.screen);
    }
    this.alive = true;
    this.delay = FIRST_DELAY;
    this.open();
  }

  disconnectedCallback() {
    this.alive = false;
    clearTimeout(this.timer);
    this.close();
  }

  setState(state, text) {
    this.dataset.state = state;
    this.statusLine.textContent = text;
  }

  connected() {
    this.delay = FIRST_DELAY;
    this.setState('connected', 'Connected');
  }

  // retry schedules a reconnect, doubling the wait each time up to MAX_DELAY.
  retry(why) {
    if (!this.alive) return;
    clearTimeout(this.timer);
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, MAX_DELAY);
    this.setState('disconnected', `${why}; reconnecting in ${Math.ceil(wait / 1000)} s`);
    this.timer = setTimeout(() => { if (this.alive) this.open(); }, wait);
  }

  // load imports the modules named by attrs, or returns null and says so
  // on the page (a retry would fail the same way: the URLs are hashed).
  async load(...attrs) {
    try {
      return await Promise.all(attrs.map((a) => import(this.getAttribute(a))));
    } catch (e) {
      console.warn('corral: console viewer failed to load', e);
      this.setState('error', 'The console viewer failed to load; reload the page.');
      return null;
    }
  }
}

// <corral-vnc>: noVNC. Every viewer asks for a shared session, so several
// viewers of one screen never disconnect each other.
class CorralVNC extends ConsoleElement {
  async open() {
    if (this.rfb) return;
    this.setState('connecting', 'Connecting…');
    const mods = await this.load('module');
    if (!mods || !this.alive || this.rfb) return;
    const RFB = mods[0].default;
    const rfb = new RFB(this.screen, socketURL(this.getAttribute('src')), {
      shared: true, wsProtocols: ['binary'],
    });
    rfb.scaleViewport = true;
    rfb.background = '#111';
    rfb.addEventListener('connect', () => { if (this.rfb === rfb) this.connected(); });
    rfb.addEventListener('disconnect', (e) => {
      if (this.rfb !== rfb) return; // closed on purpose
      this.rfb = null;
      this.retry(e.detail.clean ? 'The console closed' : 'The connection was lost');
    });
    this.rfb = rfb;
  }

  close() {
    const rfb = this.rfb;
    this.rfb = null;
    if (rfb) rfb.disconnect();
  }
}

// <corral-serial>: xterm.js. The server's first message on every
// connection is the console's recent output (possibly empty): a
// non-empty one replaces what the terminal shows, so a reconnect does not
// print the history twice.
class CorralSerial extends ConsoleElement {
  async open() {
    if (this.ws) return;
    this.setState('connecting', 'Connecting…');
    if (!this.term) {
      const mods = await this.load('module', 'fit');
      if (!mods) return;
      if (!this.term) this.makeTerminal(mods[0].Terminal, mods[1].FitAddon);
    }
    if (!this.alive || this.ws) return;
    const ws = new WebSocket(socketURL(this.getAttribute('src')));
    ws.binaryType = 'arraybuffer';
    let first = true;
    ws.onopen = () => { if (this.ws === ws) this.connected(); };
    ws.onmessage = (e) => {
      const data = typeof e.data === 'string' ? e.data : new Uint8Array(e.data);
      if (first) {
        first = false;
        if (data.length === 0) return;
        this.term.reset();
      }
      this.term.write(data);
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return; // closed on purpose
      this.ws = null;
      this.retry(e.reason || (e.code === 1006 ? 'The connection failed' : 'The console closed'));
    };
    this.ws = ws;
  }

  makeTerminal(Terminal, FitAddon) {
    this.term = new Terminal({
      cursorBlink: true, scrollback: 10000, fontSize: 14,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, monospace',
    });
    this.fitter = new FitAddon();
    this.term.loadAddon(this.fitter);
    this.term.open(this.screen);
    this.fit();
    new ResizeObserver(() => this.fit()).observe(this.screen);
    const enc = new TextEncoder();
    const send = (bytes) => {
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(bytes);
    };
    this.term.onData((s) => send(enc.encode(s)));
    // onBinary carries bytes that are not UTF-8 text (some mouse reports).
    this.term.onBinary((s) => send(Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff)));
    this.term.focus();
  }

  fit() {
    if (this.isConnected && this.screen.clientWidth > 0) this.fitter.fit();
  }

  close() {
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close(1000, 'viewer closed');
  }
}

// <corral-rdp>: the viewer lives in rdp.js, loaded on first use.
class CorralRDP extends HTMLElement {
  async connectedCallback() {
    this.alive = true;
    if (this.viewer) return;
    let mod;
    try {
      mod = await import(this.getAttribute('script'));
    } catch (e) {
      console.warn('corral: the RDP viewer failed to load', e);
      this.dataset.state = 'error';
      this.textContent = 'The RDP viewer failed to load; reload the page.';
      return;
    }
    if (this.alive && !this.viewer) this.viewer = mod.mount(this);
  }

  disconnectedCallback() {
    this.alive = false;
    const v = this.viewer;
    this.viewer = null;
    if (v) v.close();
    this.replaceChildren();
  }
}

customElements.define('corral-vnc', CorralVNC);
customElements.define('corral-rdp', CorralRDP);
customElements.define('corral-serial', CorralSerial);
