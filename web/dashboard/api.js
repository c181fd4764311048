// The REST API client: every read the dashboard makes goes through here, with the token (if any)
// in the Authorization header, as the CLI sends it.
const TOKEN_KEY = 'hangar.token';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers() {
  const t = token();
  return t ? { Authorization: 'Bearer ' + t } : {};
}

// GET `path` as JSON; throws ApiError with the API's sentence on a non-2xx answer.
export async function get(path) {
  const res = await fetch(path, { headers: headers() });
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (e) {
    body = null;
  }
  if (!res.ok) {
    const msg = body && body.error ? body.error.message : `HTTP ${res.status} from ${path}`;
    throw new ApiError(res.status, msg);
  }
  return body;
}

export async function getText(path, signal) {
  const res = await fetch(path, { headers: headers(), signal });
  if (!res.ok) throw new ApiError(res.status, `HTTP ${res.status} from ${path}`);
  return res;
}

// The live feed at `path` (server-sent events over fetch, so the token travels in a header):
// calls onEvent(name, data) for each event until stop() is called; reconnects after a break.
export function openFeed(path, onEvent, onState) {
  let stopped = false;
  let ctrl = null;
  async function run() {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const res = await fetch(path, { headers: headers(), signal: ctrl.signal });
        if (!res.ok) throw new ApiError(res.status, 'feed refused');
        onState('live');
        await readEvents(res.body.getReader(), onEvent);
      } catch (e) {
        if (stopped) return;
      }
      onState('reconnecting');
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  run();
  return () => {
    stopped = true;
    if (ctrl) ctrl.abort();
  };
}

async function readEvents(reader, onEvent) {
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let name = 'message';
      let data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      if (data) onEvent(name, JSON.parse(data));
    }
  }
}
