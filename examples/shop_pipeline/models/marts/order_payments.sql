-- Orders with their payment, unpaid ones included: an outer-join view.
select o.order_id, o.status, o.amount, p.payment_id, p.method, p.amount as paid
from {{ ref('stg_orders') }} o
left join {{ source('raw', 'payments') }} p on p.order_id = o.order_id
