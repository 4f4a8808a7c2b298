import { randomBytes } from 'node:crypto';
import { sinkPeer, startHttpSink, type SinkPeer } from './http-sink.js';

/**
 * A Microsoft Teams "Workflows" (Power Automate) webhook on loopback: a POST of JSON to the
 * trigger URL answers 202 Accepted with an empty body — the flow runs later, so 202 is all a
 * sender ever learns. A body that is not JSON answers 400 `InvalidRequestContent`.
 */
/** `messages`: the JSON payloads accepted (202). */
export interface TeamsPeer extends SinkPeer<Record<string, unknown>> {
  /** A trigger URL shaped like Power Automate's (`/workflows/<id>/triggers/manual/paths/invoke?…`). */
  webhookUrl(workflowId?: string): string;
}

export async function startTeams(): Promise<TeamsPeer> {
  const messages: Record<string, unknown>[] = [];
  const sink = await startHttpSink({
    respond(req) {
      if (req.method !== 'POST' || !/^\/workflows\/[^/]+\/triggers\/manual\/paths\/invoke$/.test(req.path)) {
        return {
          status: 404,
          body: { error: { code: 'WorkflowNotFound', message: 'The workflow could not be found.' } },
        };
      }
      const body = req.body;
      if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        return {
          status: 400,
          body: {
            error: {
              code: 'InvalidRequestContent',
              message: "The input body for trigger 'manual' of type 'Request' must be of type JSON.",
            },
          },
        };
      }
      messages.push(body as Record<string, unknown>);
      return { status: 202, headers: { 'x-ms-workflow-run-id': `08584${randomBytes(8).toString('hex')}` } };
    },
  });
  return {
    ...sinkPeer(sink, messages),
    webhookUrl: (workflowId = 'a1b2c3d4e5f6') =>
      `${sink.url}/workflows/${workflowId}/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=heraldTestSignature`,
  };
}
