import { sinkPeer, startHttpSink, type SinkPeer } from './http-sink.js';

/**
 * A Mattermost incoming webhook on loopback: `POST /hooks/<key>` with JSON (or a form with the
 * JSON in `payload`) answers 200 `ok` in plain text; a payload without text or attachments answers
 * 400 with Mattermost's JSON error.
 */
export interface MattermostPeer extends SinkPeer<Record<string, unknown>> {
  webhookUrl(key?: string): string;
}

const error = (id: string, message: string, status = 400) => ({
  status,
  body: { id, message, detailed_error: '', request_id: 'heraldtestrequestid', status_code: status },
});

export async function startMattermost(): Promise<MattermostPeer> {
  const messages: Record<string, unknown>[] = [];
  const sink = await startHttpSink({
    respond(req) {
      if (!/^\/hooks\/[a-z0-9]+$/.test(req.path))
        return error('web.incoming_webhook.invalid.app_error', 'Invalid webhook.');
      if (req.method !== 'POST') return { status: 405, body: '' };
      let payload: unknown = req.body;
      if (
        payload !== null &&
        typeof payload === 'object' &&
        typeof (payload as { payload?: unknown }).payload === 'string'
      ) {
        try {
          payload = JSON.parse((payload as { payload: string }).payload) as unknown;
        } catch {
          payload = null;
        }
      }
      if (payload === null || typeof payload !== 'object' || Array.isArray(payload))
        return error('api.webhook.incoming.error', 'Could not decode the multipart payload of incoming webhook.');
      const p = payload as Record<string, unknown>;
      if (!p.text && !p.attachments) return error('web.incoming_webhook.text.app_error', 'No text specified.');
      messages.push(p);
      return { status: 200, body: 'ok', headers: { 'content-type': 'text/plain' } };
    },
  });
  return {
    ...sinkPeer(sink, messages),
    webhookUrl: (key = 'h3r4ldt3stk3y000000000000a') => `${sink.url}/hooks/${key}`,
  };
}
