import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { waitFor } from '../wait.js';

/**
 * Slack's Socket Mode on loopback: the WebSocket that `apps.connections.open` hands out (give
 * `url` to startSlack's `socketModeUrl`). On connect it says `hello`, as Slack does; `send` pushes
 * an envelope (slash_commands, interactive, events_api) and the app's acks are recorded by
 * envelope id. A minimal RFC 6455 server (text frames, ping/pong, close), enough for the
 * @slack/socket-mode client and no dependency.
 */
export interface SocketModePeer {
  url: string;
  /** Connections that received `hello`. */
  connections(): number;
  /** Pushes an envelope to the newest connection; returns its envelope id. */
  send(type: 'slash_commands' | 'interactive' | 'events_api', payload: Record<string, unknown>): string;
  /** The app's ack of an envelope: `{envelope_id, payload?}`. */
  ackOf(envelopeId: string, timeoutMs?: number): Promise<{ envelope_id: string; payload?: any }>;
  close(): Promise<void>;
}

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

function frame(opcode: number, payload: Buffer): Buffer {
  const len = payload.length;
  const head =
    len < 126
      ? Buffer.from([0x80 | opcode, len])
      : len < 65536
        ? Buffer.from([0x80 | opcode, 126, len >> 8, len & 0xff])
        : Buffer.concat([Buffer.from([0x80 | opcode, 127]), bigLength(len)]);
  return Buffer.concat([head, payload]);
}

function bigLength(len: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(len));
  return b;
}

/** Reads complete client frames (always masked) off `buf`; returns them and the unread rest. */
function readFrames(buf: Buffer): { frames: { opcode: number; payload: Buffer }[]; rest: Buffer } {
  const frames: { opcode: number; payload: Buffer }[] = [];
  let at = 0;
  for (;;) {
    if (buf.length - at < 2) break;
    const opcode = buf[at]! & 0x0f;
    let len = buf[at + 1]! & 0x7f;
    let off = at + 2;
    if (len === 126) {
      if (buf.length < off + 2) break;
      len = buf.readUInt16BE(off);
      off += 2;
    } else if (len === 127) {
      if (buf.length < off + 8) break;
      len = Number(buf.readBigUInt64BE(off));
      off += 8;
    }
    if (buf.length < off + 4 + len) break;
    const mask = buf.subarray(off, off + 4);
    const payload = Buffer.from(buf.subarray(off + 4, off + 4 + len));
    for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i % 4]!;
    frames.push({ opcode, payload });
    at = off + 4 + len;
  }
  return { frames, rest: buf.subarray(at) };
}

export async function startSocketMode(): Promise<SocketModePeer> {
  const sockets: Socket[] = [];
  const acks = new Map<string, { envelope_id: string; payload?: any }>();
  const server: Server = createServer((_req, res) => res.writeHead(426).end());
  server.on('upgrade', (req, socket: Socket) => {
    const key = req.headers['sec-websocket-key'];
    if (typeof key !== 'string') {
      socket.destroy();
      return;
    }
    const accept = createHash('sha1')
      .update(key + GUID)
      .digest('base64');
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      const { frames, rest } = readFrames(Buffer.concat([pending, chunk]));
      pending = rest;
      for (const f of frames) {
        if (f.opcode === 0x9) socket.write(frame(0xa, f.payload));
        else if (f.opcode === 0x8) socket.end(frame(0x8, Buffer.alloc(0)));
        else if (f.opcode === 0x1) {
          const msg = JSON.parse(f.payload.toString('utf8')) as { envelope_id?: string };
          if (typeof msg.envelope_id === 'string') acks.set(msg.envelope_id, msg as { envelope_id: string });
        }
      }
    });
    socket.on('error', () => undefined);
    sockets.push(socket);
    socket.write(
      frame(
        0x1,
        Buffer.from(
          JSON.stringify({
            type: 'hello',
            num_connections: 1,
            debug_info: { host: 'herald-test' },
            connection_info: { app_id: 'A0HERALD' },
          }),
        ),
      ),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/link`;
  return {
    url,
    connections: () => sockets.filter((s) => !s.destroyed).length,
    send(type, payload) {
      const socket = sockets.filter((s) => !s.destroyed).at(-1);
      if (!socket) throw new Error('no Socket Mode connection');
      const envelopeId = randomBytes(8).toString('hex');
      socket.write(
        frame(
          0x1,
          Buffer.from(
            JSON.stringify({
              envelope_id: envelopeId,
              type,
              payload,
              accepts_response_payload: type !== 'events_api',
              retry_attempt: 0,
              retry_reason: '',
            }),
          ),
        ),
      );
      return envelopeId;
    },
    ackOf: (envelopeId, timeoutMs = 5000) =>
      waitFor(() => acks.get(envelopeId), { timeoutMs, what: `the ack of envelope ${envelopeId}` }),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
