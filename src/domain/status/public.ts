/**
 * What the public status page knows, as plain data: the contract between the stores that write
 * public state (components, published incident updates, maintenances, the page's config) and the
 * page that renders it (src/status/). Nothing internal is in these types: no actor, no
 * connection, no unpublished text. The page and its JSON are rendered from a StatusSnapshot only.
 */

export const COMPONENT_STATUSES = [
  'operational',
  'under_maintenance',
  'degraded_performance',
  'partial_outage',
  'major_outage',
] as const;
export type ComponentStatus = (typeof COMPONENT_STATUSES)[number];

/** How bad a status is: the worst (highest) open impact decides a component's status. */
export const COMPONENT_STATUS_RANK: Record<ComponentStatus, number> = {
  operational: 0,
  under_maintenance: 1,
  degraded_performance: 2,
  partial_outage: 3,
  major_outage: 4,
};

/** The public states of an incident's update (Statuspage's incident statuses). */
export const PUBLIC_STATES = ['investigating', 'identified', 'monitoring', 'resolved'] as const;
export type PublicState = (typeof PUBLIC_STATES)[number];

/** Statuspage's incident impact, derived from the severity when published. */
export type PublicImpact = 'none' | 'minor' | 'major' | 'critical';

export const MAINTENANCE_STATES = ['scheduled', 'in_progress', 'verifying', 'completed'] as const;
export type MaintenanceState = (typeof MAINTENANCE_STATES)[number];

/** The page's settings: the status_page connection's config. */
export interface PublicPageConfig {
  title: string;
  /** Where the page is reached from outside (links in feeds and the JSON): no trailing slash. */
  public_url: string;
  logo_url: string | null;
  /** IANA time zone the page shows times in. */
  time_zone: string;
  /** The page's default locale (`en`, `de`): Accept-Language may pick another supported one. */
  locale: string;
  support_url: string | null;
  /** Origins allowed to embed the page in a frame (CSP frame-ancestors); empty: none. */
  frame_ancestors: string[];
}

/** One change of a component's effective status (the 90-day history is built from these). */
export interface PublicStatusChange {
  at: string;
  status: ComponentStatus;
}

export interface PublicComponent {
  id: string;
  name: string;
  description: string;
  /** The one-level group it is shown under; null when ungrouped. */
  group: string | null;
  position: number;
  /** Effective status: the worst open impact, else the manual status. */
  status: ComponentStatus;
  created_at: string;
  updated_at: string;
  /** Effective status changes, oldest first, covering at least the last 90 days (the one before the window included). */
  history: PublicStatusChange[];
}

export interface PublicUpdate {
  /** The delivery that published it (stable: corrections and retractions name it). */
  id: string;
  status: PublicState;
  body: string;
  created_at: string;
  /** Set when a correction edited it ("Updated" on the page). */
  updated_at: string | null;
  /** The affected components as published with this update. */
  affected_components: { id: string; status: ComponentStatus }[];
}

export interface PublicIncident {
  id: string;
  name: string;
  impact: PublicImpact;
  /** The latest update's state. */
  status: PublicState;
  created_at: string;
  updated_at: string;
  /** When an update in state `resolved` was published; null while unresolved. */
  resolved_at: string | null;
  /** Component ids named by the incident as last published. */
  component_ids: string[];
  /** Newest first; never empty (an incident whose every update was retracted is not public). */
  updates: PublicUpdate[];
}

export interface PublicMaintenanceUpdate {
  id: string;
  status: MaintenanceState;
  body: string;
  /** `update` (written by a person; the maintenance's own description is its first one), `reminder` or `transition` (automatic). */
  kind: 'update' | 'reminder' | 'transition';
  created_at: string;
}

export interface PublicMaintenance {
  id: string;
  name: string;
  status: MaintenanceState;
  scheduled_for: string;
  scheduled_until: string;
  component_ids: string[];
  created_at: string;
  updated_at: string;
  /** Newest first. */
  updates: PublicMaintenanceUpdate[];
}

/** Everything the page shows, as of one version of the public state. */
export interface StatusSnapshot {
  /** The store's status version this was read at (changes whenever anything public changes). */
  version: number;
  /** null: no status_page connection exists (the page answers 404). */
  page: PublicPageConfig | null;
  /** Components shown on the page, ordered by group then position then name. */
  components: PublicComponent[];
  /** Published incidents, newest first: every unresolved one and the resolved ones of the window kept. */
  incidents: PublicIncident[];
  /** Maintenances not completed, and those completed in the window kept; soonest first. */
  maintenances: PublicMaintenance[];
  /** When the snapshot was read. */
  read_at: string;
}
