/**
 * The ONLY place a Redis key is spelled. Every key lives under one hash tag, `{<prefix>}`, so a
 * Redis Cluster keeps them in one slot and multi-key scripts stay legal. Tests give each file its
 * own prefix, which is also how several Heralds could share one Redis.
 */
export function createKeys(prefix: string) {
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(prefix)) throw new Error(`Invalid key prefix "${prefix}"`);
  const t = `{${prefix}}`;
  return {
    /** Hash tag itself; BullMQ's queue prefix is built from it so its keys share the slot. */
    tag: t,
    bullPrefix: `${t}:bull`,
    meta: (name: string) => `${t}:meta:${name}`,

    incident: (id: string) => `${t}:inc:${id}`,
    /** The former all-incidents index: no longer read or written (see src/store/incidents.ts). */
    incidents: () => `${t}:incs`,
    /** The former per-status index: read until the worker has moved its ids (src/store/incident-indexes.ts). */
    incidentsByStatus: (status: string) => `${t}:incs:status:${status}`,
    /** The incidents of one status and one severity: every incident is in exactly one. */
    incidentsBy: (status: string, severity: string) => `${t}:incs:by:${status}:${severity}`,
    incidentEvents: (id: string) => `${t}:inc:${id}:events`,
    /** The data of an incident's implied `incident.created` event, once its title or severity changed. */
    incidentCreated: (id: string) => `${t}:inc:${id}:created`,
    incidentExecutions: (id: string) => `${t}:inc:${id}:exes`,
    /** Per connection, the incident's conversation so far: `<sequence>|<last delivery id>` (written by execute, correct, retract). */
    incidentThreads: (id: string) => `${t}:inc:${id}:threads`,
    /** Per connection, the conversation's first delivered message: JSON {ref, delivery_id} (written by the worker). */
    incidentThreadRoots: (id: string) => `${t}:inc:${id}:roots`,
    /** The update cadence's schedule: incident id, score = when its next reminder is due (ms). */
    reminders: () => `${t}:reminders`,
    /** Where the incident's Slack announcement is (channel, ts) and which execute it shows. */
    incidentAnnouncement: (id: string) => `${t}:inc:${id}:announcement`,
    /** The process refreshing that announcement now (a token with a TTL), and its "changed meanwhile" mark. */
    incidentAnnouncementRefresh: (id: string) => `${t}:inc:${id}:announcement:refresh`,
    incidentAnnouncementDirty: (id: string) => `${t}:inc:${id}:announcement:dirty`,

    template: (id: string) => `${t}:tpl:${id}`,
    templates: () => `${t}:tpls`,
    templateVersions: (id: string) => `${t}:tpl:${id}:versions`,
    templateNames: () => `${t}:tpl-names`,
    /** Non-closed incidents that attach a template: the in-use rule of docs/explanation/delivery-semantics.md. */
    templateIncidents: (id: string) => `${t}:tpl:${id}:incs`,

    connection: (id: string) => `${t}:con:${id}`,
    connections: () => `${t}:cons`,

    audience: (id: string) => `${t}:aud:${id}`,
    /** Every audience: score-0 sorted set of ids, paged BYLEX like the other indexes. */
    audiences: () => `${t}:auds`,
    /** Audience key → id: uniqueness is claimed in the same atomic step as the write. */
    audienceKeys: () => `${t}:aud-keys`,
    /** Hash, field `n`: how many audiences there are (creates compare-and-set it: the limit holds under races). */
    audienceCount: () => `${t}:aud-count`,
    /** Executions with an approval still pending for the audience: its delete is refused while any is. */
    audiencePendingApprovals: (audienceId: string) => `${t}:aud:${audienceId}:pending`,
    /** The audiences a connection belongs to (a connection delete takes it out of each). */
    connectionAudiences: (connectionId: string) => `${t}:con:${connectionId}:auds`,
    /**
     * Per connection, a counter bumped by every audience write that adds or removes it: the
     * connection delete's compare-and-set, so an audience joining meanwhile is never missed.
     */
    connectionAudiencesRev: () => `${t}:con-auds-rev`,

    execution: (id: string) => `${t}:exe:${id}`,
    delivery: (id: string) => `${t}:dlv:${id}`,
    /** Non-terminal deliveries of a connection (cancelled when it is deleted or disabled). */
    connectionActiveDeliveries: (connectionId: string) => `${t}:con:${connectionId}:active`,
    /** Outbox: deliveries committed but not yet confirmed on the queue (score = commit time, ms). */
    deliveryOutbox: () => `${t}:dlv-outbox`,

    /** An execution's approvals, one JSON record (store/approvals.ts): it changes, the execution does not. */
    approvals: (executionId: string) => `${t}:exe:${executionId}:approvals`,
    /** Executions with a pending approval, score = when the first of them expires (ms): the expiry sweep's schedule. */
    approvalsDue: () => `${t}:approvals-due`,
    /** Executions whose approvers were not told of an approval's latest state, score = when to try (ms). */
    approvalsToNotify: () => `${t}:approvals-notify`,
    /** Integrator events: the outbox stream every change appends to (store/timeline.ts). */
    eventStream: () => `${t}:evt-stream`,
    /**
     * The Slack edge's approval messages of an execution: `dm|<audience>|<user>` → JSON {channel, ts}
     * of the DM posted to that approver, `line|<audience>|<state>` → 1 once that thread line is posted.
     */
    approvalMessages: (executionId: string) => `${t}:exe:${executionId}:approval-msgs`,
    /** Held while a process notifies one audience's approval (a token with a TTL). */
    approvalMessagesLock: (executionId: string, audience: string) =>
      `${t}:exe:${executionId}:approval-msgs:lock:${audience}`,
    /** Per execution: its deliveries still open and finished per status (for execution.completed). */
    executionTally: (id: string) => `${t}:exe:${id}:tally`,
    /** The last stream entry the dispatcher moved into the event log (docs/events.md). */
    eventCursor: () => `${t}:evt-cursor`,
    /** Per incident: its events so far (each event's `sequence`). */
    eventSequences: () => `${t}:evt-seq`,
    /** Event id → the event as sent (JSON); `evt-log-time` orders them by commit time (ms) for replay and trimming. */
    eventLog: () => `${t}:evt-log`,
    eventLogTime: () => `${t}:evt-log-time`,
    /** Events in the log not yet matched to endpoints (score = commit time, ms). */
    eventFanout: () => `${t}:evt-fanout`,
    eventEndpoint: (id: string) => `${t}:evp:${id}`,
    eventEndpoints: () => `${t}:evps`,
    /** An endpoint's event deliveries, score = created (ms): its delivery log. */
    eventEndpointDeliveries: (id: string) => `${t}:evp:${id}:dlvs`,
    /** Endpoint id → since when (ms) it has failed without a success in between. */
    eventEndpointFailing: () => `${t}:evp-failing`,
    /** The claim of the admins' notice of one disable (endpoint, its rev when disabled): one notice per disable. */
    eventEndpointNotice: (id: string, rev: number) => `${t}:evp:${id}:notice:${rev}`,
    eventDelivery: (id: string) => `${t}:evd:${id}`,
    /** Event deliveries waiting for their next attempt, score = when (ms); a claim moves it a lease ahead. */
    eventDue: () => `${t}:evd-due`,

    ...statusPageKeys(t),
    ...subscriberKeys(t),
    apiKey: (id: string) => `${t}:key:${id}`,
    apiKeys: () => `${t}:keys`,
    apiKeyByHash: (sha256hex: string) => `${t}:key-hash:${sha256hex}`,
    apiKeyLastUsed: () => `${t}:key-used`,

    idempotency: (apiKeyId: string, keyDigest: string) => `${t}:idem:${apiKeyId}:${keyDigest}`,
    rateLimitPrefix: (name: string) => `${t}:rl:${name}`,
    pacing: (connectionId: string) => `${t}:pace:${connectionId}`,
    /** Pacing slots reserved by waiting deliveries (the schedule; `pacing` is the send bucket). */
    pacingSchedule: (connectionId: string) => `${t}:pace:${connectionId}:schedule`,
  };
}

/** The public status page (docs/status-page.md): components, published incidents, maintenances. */
function statusPageKeys(t: string) {
  return {
    /** A component (JSON record, with the impacts of the incidents and maintenances on it). */
    component: (id: string) => `${t}:cmp:${id}`,
    /** Every component: score-0 sorted set of ids, paged BYLEX. */
    components: () => `${t}:cmps`,
    /** Hash, field `n`: how many components there are (creates compare-and-set it). */
    componentCount: () => `${t}:cmp-count`,
    /** A component's effective status changes: sorted set of JSON {at, status}, score = ms (the 90-day bars). */
    componentHistory: (id: string) => `${t}:cmp:${id}:history`,
    /** A component's own timeline (manual changes), JSON events like an incident's. */
    componentEvents: (id: string) => `${t}:cmp:${id}:events`,
    /** Component name (case-folded) → id: uniqueness is claimed in the same atomic step as the write. */
    componentNames: () => `${t}:cmp-names`,
    /** The status_page connection's id: one page per Herald, claimed in the connection's create. */
    statusPage: () => `${t}:status-page`,
    /** Hash, field `v`: bumped by every write that changes what the public page shows. */
    statusVersion: () => `${t}:status-version`,
    /** The public face of an incident once something was published (JSON). */
    publicIncident: (incidentId: string) => `${t}:pub:${incidentId}`,
    /** Published incidents: score-0 sorted set of `<first publish ms, 13 digits>|<incident id>`, paged BYLEX REV. */
    publicIncidents: () => `${t}:pubs`,
    maintenance: (id: string) => `${t}:mnt:${id}`,
    /** Every maintenance: score-0 sorted set of ids (ULIDs sort by creation), paged BYLEX. */
    maintenances: () => `${t}:mnts`,
    /** Maintenances with a timed step ahead (reminder, start, end), score = when it is due (ms). */
    maintenancesDue: () => `${t}:mnts-due`,
  };
}

/** Subscribers of the status page (docs/subscribers.md; src/store/subscribers.ts), under the tag `t`. */
function subscriberKeys(t: string) {
  return {
    /** The key behind subscriber ids and link tokens (random, sealed by the secret box), created once. */
    subscriberKey: () => `${t}:sub-key`,
    /** Subscribers, bucketed by id (src/store/subscribers.ts: SUBSCRIBER_BUCKETS): hash id → packed record. */
    subscriberBucket: (bucket: number) => `${t}:subs:${bucket}`,
    /** Hash, a field per state name (pending, confirmed, unsubscribed, bounced): how many subscribers are in it. */
    subscriberCounts: () => `${t}:subs-count`,
    /** Unsubscribed or unconfirmed subscribers to erase, score = when (ms). */
    subscribersExpiring: () => `${t}:subs-expire`,
    /** A notice to subscribers (JSON): what one public update, correction, retraction or maintenance notice says. */
    subscriberNotice: (id: string) => `${t}:ntc:${id}`,
    /** The notices an execution's status page deliveries opened (a set of ids: its receipts' tally). */
    subscriberExecutionNotices: (executionId: string) => `${t}:exe:${executionId}:ntcs`,
    /** A notice's tally: hash of counts per recipient state. */
    subscriberNoticeTally: (id: string) => `${t}:ntc:${id}:tally`,
    /** A notice's recipients: hash subscriber id → packed recipient state. */
    subscriberNoticeRecipients: (id: string) => `${t}:ntc:${id}:rcpt`,
    /** Notices not complete yet (score 0); a completed one leaves it, and its keys expire a retention later. */
    subscriberNotices: () => `${t}:ntcs`,
    /** The outbox of notice work: `<notice id>|<bucket>` and `<notice id>|r|<subscriber id>` (a retry), score = due (ms); a claim moves it a lease ahead. */
    subscriberWork: () => `${t}:ntc-work`,
    /** Mails and challenges of the subscription itself (confirm, already subscribed, webhook challenge), score = due (ms). */
    subscriberTx: () => `${t}:subs-tx`,
  };
}

export type Keys = ReturnType<typeof createKeys>;
