import { z } from 'zod';
import { CHANNEL_TYPES, type ChannelType } from '../../channels/index.js';
import type { Template, TemplateWire } from '../../domain/template/template.js';

/** Strips storage-only fields: what goes on the wire. */
export function presentTemplate(t: Template): TemplateWire {
  const { variables_declared: _declared, ...wire } = t;
  return wire;
}

const previewShape = Object.fromEntries(
  CHANNEL_TYPES.map((t) => [
    t,
    z.object({
      subject: z.string(),
      body: z.string(),
      html: z.string().optional().meta({ description: 'E-mail only: the HTML part.' }),
    }),
  ]),
) as { [K in ChannelType]: z.ZodObject<{ subject: z.ZodString; body: z.ZodString; html: z.ZodOptional<z.ZodString> }> };
export const TemplatePreviewsSchema = z.object({ previews: z.object(previewShape) }).meta({ id: 'TemplatePreviews' });
