import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';

/**
 * A local DNS server over UDP on a random loopback port, for tests of name resolution under bad
 * DNS: per query the `rule` decides to answer (A/AAAA records), to answer NXDOMAIN, to answer
 * after a delay, or to DROP the query (no answer ever, like a resolver behind a broken firewall).
 * Point Herald at it with HERALD_DNS_SERVERS=`server.address`.
 */
export type DnsAction = { answer: string[]; delayMs?: number } | { nxdomain: true; delayMs?: number } | { drop: true };

/** `type` is the question's record type: 'A', 'AAAA', or whatever else a client asks. */
export type DnsRule = (name: string, type: string) => DnsAction;

export interface DnsServer {
  /** `127.0.0.1:<port>` */
  address: string;
  port: number;
  /** Queries received, by lower-cased name (every type). */
  queries: Map<string, number>;
  close(): Promise<void>;
}

export async function startDnsServer(rule: DnsRule): Promise<DnsServer> {
  const socket = dgram.createSocket('udp4');
  const queries = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  socket.on('message', (msg, rinfo) => {
    let q: dnsPacket.DecodedPacket;
    try {
      q = dnsPacket.decode(msg);
    } catch {
      return;
    }
    const question = q.questions?.[0];
    if (!question) return;
    const name = question.name.toLowerCase();
    queries.set(name, (queries.get(name) ?? 0) + 1);
    const action = rule(name, question.type);
    if ('drop' in action) return;
    const answers: dnsPacket.Answer[] =
      'answer' in action
        ? action.answer
            .filter((ip) => (question.type === 'AAAA' ? ip.includes(':') : question.type === 'A' && !ip.includes(':')))
            .map((ip) => ({
              type: question.type === 'AAAA' ? ('AAAA' as const) : ('A' as const),
              name: question.name,
              ttl: 1,
              class: 'IN' as const,
              data: ip,
            }))
        : [];
    const flags = dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | ('nxdomain' in action ? 3 : 0);
    const reply = dnsPacket.encode({ type: 'response', id: q.id, flags, questions: q.questions, answers });
    const send = () => socket.send(reply, rinfo.port, rinfo.address);
    if (action.delayMs) {
      const t = setTimeout(() => {
        timers.delete(t);
        send();
      }, action.delayMs);
      timers.add(t);
    } else send();
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  const port = socket.address().port;
  return {
    address: `127.0.0.1:${port}`,
    port,
    queries,
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        socket.close(() => resolve());
      }),
  };
}
