import { componentWire, type ComponentWire, type StoredComponent } from '../../domain/component/component.js';

/** What goes on the wire: the effective status and what impacts it; no revision (that is the ETag). */
export function presentComponent(c: StoredComponent): ComponentWire {
  return componentWire(c);
}
