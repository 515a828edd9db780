-- Outer-join view: every order line, with its product when the product is known.
select l.order_id, l.line_no, l.quantity, l.unit_price, p.product_id, p.name as product_name, p.category
from {{ ref('order_lines') }} l
left join {{ ref('products') }} p on l.product_id = p.product_id
