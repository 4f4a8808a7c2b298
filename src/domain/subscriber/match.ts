/**
 * Whether a notice concerns a subscriber: one who chose no components hears of everything, a
 * notice that names none concerns everyone, and otherwise they must share a component.
 * (Structural types: the domain imports no ports.)
 */
export function concerns(
  sub: { readonly components: readonly string[] },
  notice: { readonly component_ids: readonly string[] },
): boolean {
  if (sub.components.length === 0 || notice.component_ids.length === 0) return true;
  const wanted = new Set(sub.components);
  return notice.component_ids.some((id) => wanted.has(id));
}
