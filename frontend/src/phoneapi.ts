// The owner's paired phones (docs/admin-api.md, "Phones"): the window lists, adds and removes
// them; a paired phone subscribes itself to pushes. Shapes of backend/admin/devices.go.
import { request } from "./api";

export interface Device {
  id: string;
  name: string;
  node: string;
  paired: string;
  lastUsed: string;
  push: boolean;
}

export interface DeviceList {
  devices: Device[];
  /** https://<node>.<tailnet>.ts.net, "" while the node is not on the tailnet. */
  url: string;
}

export interface Pairing {
  link: string;
  /** data:image/png;base64,… of the link */
  qr: string;
  expiresAt: string;
}

/** A paired phone's session: its device id and the node's VAPID key to subscribe with. */
export interface DeviceSession {
  csrfToken: string;
  device: string;
  pushKey: string;
}

const enc = encodeURIComponent;

export const phones = {
  list: () => request<DeviceList>("GET", "/api/devices"),
  pair: () => request<Pairing>("POST", "/api/devices/pair"),
  remove: (id: string) => request<void>("POST", `/api/devices/${enc(id)}/revoke`),
  session: () => request<DeviceSession>("GET", "/api/session"),
  subscribe: (sub: PushSubscriptionJSON) => request<void>("PUT", "/api/device/push", sub),
  unsubscribe: () => request<void>("DELETE", "/api/device/push"),
};
