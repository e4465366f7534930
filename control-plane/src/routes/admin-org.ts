// The caller's own organization (admin:write): read it, and set its IP and referrer
// allowlists. The tier is the provider's to set (svcctl orgs set --tier).
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { OrgService } from '../orgs/org-service.js';
import { responses } from '../http/schemas.js';
import { OrgView, orgView } from './views.js';

export function adminOrgRoutes(orgs: OrgService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(OrgView);
    const config = { scope: 'admin:write' as const };
    const tags = ['organization'];

    app.get(
      '/admin/org',
      { config, schema: { tags, summary: 'Read your organization', response: responses({ 200: Type.Ref(OrgView) }) } },
      async (request) => orgView(await orgs.get(request.principal!.org.id)),
    );

    app.patch(
      '/admin/org',
      {
        config,
        schema: {
          tags,
          summary: 'Set the IP allowlist (CIDR, IPv4 and IPv6) and the referrer allowlist for public keys',
          body: Type.Object(
            {
              ip_allowlist: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 100 })),
              referrer_allowlist: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { maxItems: 100 })),
            },
            { additionalProperties: false, minProperties: 1 },
          ),
          response: responses({ 200: Type.Ref(OrgView) }),
        },
      },
      async (request) => {
        const { ip_allowlist, referrer_allowlist } = request.body;
        return orgView(
          await orgs.update(request.principal!.org.id, { ipAllowlist: ip_allowlist, referrerAllowlist: referrer_allowlist }),
        );
      },
    );
  };
}
