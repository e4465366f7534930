// The caller's own organization (admin:write): read it, and set what the customer owns:
// its name, IP and referrer allowlists, default pool and low-balance alert. Tier, credit
// limit, billing mode and GPU quota are the provider's (svcctl orgs set, svcctl billing).
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiError } from '@svc/shared';
import type { OrgService } from '../orgs/org-service.js';
import { usdToNanos, type BillingService } from '../billing/billing-service.js';
import { POOLS } from '../models/catalog.js';
import { StringEnum, responses } from '../http/schemas.js';
import { OrgView, orgView } from './views.js';

/** Fields a customer may see but only the provider sets; named in the refusal instead of "unsupported". */
const PROVIDER_FIELDS = ['tier', 'credit_limit', 'billing_mode', 'mode', 'allowed_models', 'gpu_quota'] as const;

/** The most a low-balance threshold may be, in USD: keeps the exact nano-dollar value a safe integer. */
const MAX_THRESHOLD_USD = 1_000_000;

const Organization = Type.Intersect([
  Type.Ref(OrgView),
  Type.Object({
    low_balance_threshold: Type.Union([Type.Number(), Type.Null()], {
      description: 'USD; a billing.balance_low webhook event is sent when the balance falls below it. null: no alert.',
    }),
  }),
]);

export function adminOrgRoutes(orgs: OrgService, billing: BillingService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(OrgView);
    const config = { scope: 'admin:write' as const };
    const tags = ['organization'];

    const view = async (orgId: string) => {
      const account = await billing.account(orgId);
      const threshold = account.lowBalanceNanos;
      return { ...orgView(await orgs.get(orgId)), low_balance_threshold: threshold === null ? null : threshold / 1e9 };
    };

    app.get(
      '/admin/org',
      { config, schema: { tags, operationId: 'getOrganization', summary: 'Read your organization and its settings', response: responses({ 200: Organization }) } },
      async (request) => view(request.principal!.org.id),
    );

    app.patch(
      '/admin/org',
      {
        config,
        // Before schema validation, so the answer says whose field it is.
        preValidation: async (request) => {
          const body = request.body as Record<string, unknown> | null;
          const field = body && typeof body === 'object' ? PROVIDER_FIELDS.find((f) => f in body) : undefined;
          if (field) {
            throw new ApiError('invalid_request', `${field} is set by the provider, not through the API; ask your provider to change it`, { param: field });
          }
        },
        schema: {
          tags,
          operationId: 'updateOrganization',
          summary: 'Set your organization\'s name, IP and referrer allowlists, default pool and low-balance alert',
          body: Type.Object(
            {
              name: Type.Optional(Type.String({ minLength: 1, maxLength: 63, description: '1-63 lowercase letters, digits or dashes; unique among organizations' })),
              ip_allowlist: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 100 })),
              referrer_allowlist: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { maxItems: 100 })),
              default_pool: Type.Optional(
                Type.Union([StringEnum(POOLS), Type.Null()], { description: 'Pool used when a request pins none; null: any pool' }),
              ),
              low_balance_threshold: Type.Optional(
                Type.Union([Type.Number({ minimum: 0, maximum: MAX_THRESHOLD_USD }), Type.Null()], {
                  description: 'USD, at most 9 decimals; null turns the alert off',
                }),
              ),
            },
            { additionalProperties: false, minProperties: 1 },
          ),
          response: responses({ 200: Organization }),
        },
      },
      async (request) => {
        const orgId = request.principal!.org.id;
        const { name, ip_allowlist, referrer_allowlist, default_pool, low_balance_threshold } = request.body;
        // Checked before anything is written, so a bad threshold leaves the org as it was.
        const lowBalanceNanos =
          low_balance_threshold === undefined || low_balance_threshold === null
            ? low_balance_threshold
            : usdToNanos(String(low_balance_threshold), 'low_balance_threshold');
        await orgs.update(orgId, { name, ipAllowlist: ip_allowlist, referrerAllowlist: referrer_allowlist, defaultPool: default_pool });
        if (lowBalanceNanos !== undefined) await billing.configure(orgId, { lowBalanceNanos });
        return view(orgId);
      },
    );
  };
}
